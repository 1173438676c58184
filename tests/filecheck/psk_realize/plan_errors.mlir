// A plan that is refused as a whole, before any nest is looked at: its shape
// (E7002), its realization (E7001), its file (E0001 when it cannot be read,
// E7002 when it is not JSON). None of these is placed at an operation: the
// error names the input file and then the plan file.
//
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_not_object.json"}' 2>&1 | filecheck %s --check-prefix=NOT-OBJECT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_unknown_key.json"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-KEY
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_no_realization.json"}' 2>&1 | filecheck %s --check-prefix=NO-REALIZATION
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_layout_list.json"}' 2>&1 | filecheck %s --check-prefix=LAYOUT-LIST
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_layout_null.json"}' 2>&1 | filecheck %s --check-prefix=LAYOUT-NULL
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_nest_not_object.json"}' 2>&1 | filecheck %s --check-prefix=NEST-NOT-OBJECT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_profile_number.json"}' 2>&1 | filecheck %s --check-prefix=PROFILE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_not_json.json"}' 2>&1 | filecheck %s --check-prefix=NOT-JSON
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_empty.json"}' 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_not_utf8.json"}' 2>&1 | filecheck %s --check-prefix=NOT-UTF8
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/no_such_plan.json"}' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs"}' 2>&1 | filecheck %s --check-prefix=DIRECTORY
//
// The realization: a name that is none, a record naming a site the program
// does not have or a type that is none, a record file that is missing, not
// JSON, or names itself.
//
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_f16.json"}' 2>&1 | filecheck %s --check-prefix=F16
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_number.json"}' 2>&1 | filecheck %s --check-prefix=NUMBER
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_unknown_site.json"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN-SITE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_bad_type.json"}' 2>&1 | filecheck %s --check-prefix=BAD-TYPE
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_bad_default.json"}' 2>&1 | filecheck %s --check-prefix=BAD-DEFAULT
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_missing_file.json"}' 2>&1 | filecheck %s --check-prefix=RECORD-MISSING
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_file_not_json.json"}' 2>&1 | filecheck %s --check-prefix=RECORD-NOT-JSON
// RUN: not presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_file_loop.json"}' 2>&1 | filecheck %s --check-prefix=RECORD-LOOP
//
// A record file beside the plan (its path is relative to the plan's folder),
// typing one site apart: accepted.
//
// RUN: presk-opt %s -p 'psk-fuse,psk-realize{plan="%S/Inputs/plan_realization_file.json"}' | filecheck %s --check-prefix=RECORD

!A = !psk_core.tensor<[i: 4, k: 8]>
!W = !psk_core.tensor<[k: 8, j: 16]>
!O = !psk_core.tensor<[i: 4, j: 16]>
!B = !psk_core.tensor<[j: 16]>
func.func @f(%a: !A, %w: !W, %b: !B) -> !O {
  %0 = psk_core.dot %a, %w : !O
  %1 = psk_core.add %0, %b : !O
  %2 = psk_core.softmax %1 [j] : !O
  func.return %2 : !O
}

// NOT-OBJECT:      plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_not_object.json: a plan is a JSON object with realization, profile, layout
// NOT-OBJECT-NOT:  Traceback
// UNKNOWN-KEY:     plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_unknown_key.json: unknown plan key "layouts" (a plan has realization, profile, layout)
// NO-REALIZATION:  plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_no_realization.json: a plan states its realization ("realization": "f32", say)
// LAYOUT-LIST:     plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_layout_list.json: "layout" is an object keyed by nest name
// LAYOUT-NULL:     plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_layout_null.json: "layout" is an object keyed by nest name
// NEST-NOT-OBJECT: plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_nest_not_object.json: nest "f/%0": its layout is an object of decisions
// PROFILE:         plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_profile_number.json: "profile" is the path of a machine profile, a string
// NOT-JSON:        plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_not_json.json:2:1: the plan is not JSON: Expecting ',' delimiter
// EMPTY:           plan_errors.mlir: error: E7002: {{.*}}Inputs/plan_empty.json:{{[0-9]+}}:1: the plan is not JSON: Expecting value
// NOT-UTF8:        plan_errors.mlir: error: E0001: pass 'psk-realize' failed: the plan {{.*}}Inputs/plan_not_utf8.json is not UTF-8 text
// MISSING:         plan_errors.mlir: error: E0001: pass 'psk-realize' failed: cannot read the plan {{.*}}Inputs/no_such_plan.json: No such file or directory
// DIRECTORY:       plan_errors.mlir: error: E0001: pass 'psk-realize' failed: cannot read the plan {{.*}}Inputs: Is a directory

// F16:             plan_errors.mlir: error: E7001: {{.*}}Inputs/plan_realization_f16.json: a realization is f64, f32, bf16 or @FILE, not "f16"
// NUMBER:          plan_errors.mlir: error: E7001: {{.*}}Inputs/plan_realization_number.json: a realization is a name, @FILE or a record of sites, not 32
// UNKNOWN-SITE:    plan_errors.mlir: error: E7001: {{.*}}Inputs/plan_realization_unknown_site.json: site "f/%7" is not a launch of this program
// BAD-TYPE:        plan_errors.mlir: error: E7001: {{.*}}Inputs/plan_realization_bad_type.json: "f/%0": a site's realization is f64, f32 or bf16, not "int8"
// BAD-DEFAULT:     plan_errors.mlir: error: E7001: {{.*}}Inputs/plan_realization_bad_default.json: "default": a site's realization is f64, f32 or bf16, not ["bf16"]
// RECORD-MISSING:  plan_errors.mlir: error: E0001: pass 'psk-realize' failed: cannot read the realization record {{.*}}Inputs/no_such_record.json: No such file or directory
// RECORD-NOT-JSON: plan_errors.mlir: error: E7001: {{.*}}Inputs/record_not_json.json:1:1: the realization record is not JSON: Expecting value
// RECORD-LOOP:     plan_errors.mlir: error: E7001: {{.*}}Inputs/record_loop.json: a realization record file holds a record or a uniform name, not "@record_loop.json"

// RECORD:      builtin.module attributes {psk_realize.default = "f32"}
// RECORD:      psk_realize.nest "f/%0" realize <f32, f32> layout <tile = [4, 16], lanes = 4, default(form = "tiled", kblock = "none", order = "IJ", split = "executor", pack = false, epilogue = false)> : !O
// RECORD:      psk_realize.group "f/%1" realize <f32, f32> layout <default(split = "executor")> : !O
// RECORD:      psk_realize.nest "f/%2" realize <bf16, f32> layout <default(split = "executor", passes = 3)> : !O

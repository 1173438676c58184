// Every nest a plan names exists and is a nest: the root of a fusion group
// or a primitive launched by itself, named "<function>/%<n>". Checked on the
// course GPT (corpus/nlp/gpt.mlir) after psk-fuse; each refusal is E7002
// naming the plan and the nest, placed at no operation (the nest does not
// exist), and listing the function's nests when the function exists.
//
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_unknown_function.json"}' 2>&1 | filecheck %s --check-prefix=FUNCTION
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_function_case.json"}' 2>&1 | filecheck %s --check-prefix=FUNCTION-CASE
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_group_member.json"}' 2>&1 | filecheck %s --check-prefix=MEMBER
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_named_member.json"}' 2>&1 | filecheck %s --check-prefix=NAMED-MEMBER
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_field.json"}' 2>&1 | filecheck %s --check-prefix=FIELD
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_split_view.json"}' 2>&1 | filecheck %s --check-prefix=SPLIT-VIEW
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_merge_view.json"}' 2>&1 | filecheck %s --check-prefix=MERGE-VIEW
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_call.json"}' 2>&1 | filecheck %s --check-prefix=CALL
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_constant.json"}' 2>&1 | filecheck %s --check-prefix=CONSTANT
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_argument.json"}' 2>&1 | filecheck %s --check-prefix=ARGUMENT
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_past_the_end.json"}' 2>&1 | filecheck %s --check-prefix=PAST-END
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_second_of_two.json"}' 2>&1 | filecheck %s --check-prefix=SECOND
//
// Malformed names.
//
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_no_slash.json"}' 2>&1 | filecheck %s --check-prefix=NO-SLASH
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_no_percent.json"}' 2>&1 | filecheck %s --check-prefix=NO-PERCENT
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_function_only.json"}' 2>&1 | filecheck %s --check-prefix=FUNCTION-ONLY
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_binding_only.json"}' 2>&1 | filecheck %s --check-prefix=BINDING-ONLY
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_no_function.json"}' 2>&1 | filecheck %s --check-prefix=NO-FUNCTION
// RUN: not presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_name_empty.json"}' 2>&1 | filecheck %s --check-prefix=EMPTY
//
// A plan naming only nests, each with decisions of its kind (the seed's
// attention plan, two softmax passes, a bias epilogue on both of the MLP's
// products, splits on a group and a reduction): accepted, and every stated
// decision is kept beside the defaults of the others.
//
// RUN: presk-opt %S/../../../corpus/nlp/gpt.mlir -p 'psk-fuse,psk-realize{plan="%S/Inputs/nest_all_attention.json"}' | filecheck %s --check-prefix=ACCEPTED

// FUNCTION:      gpt.mlir: error: E7002: {{.*}}Inputs/nest_unknown_function.json: nest "Attention.apply/%4": the program has no function @Attention.apply
// FUNCTION-NOT:  Traceback
// FUNCTION-CASE: gpt.mlir: error: E7002: {{.*}}Inputs/nest_function_case.json: nest "selfattention.apply/%4": the program has no function @selfattention.apply
// MEMBER:        gpt.mlir: error: E7002: {{.*}}Inputs/nest_group_member.json: nest "LayerNorm.apply/%10": @LayerNorm.apply has no nest there (a value inside a fusion group, a view or a structural value is none); its nests are LayerNorm.apply/%1, LayerNorm.apply/%2, LayerNorm.apply/%3, LayerNorm.apply/%4, LayerNorm.apply/%6, LayerNorm.apply/%11{{$}}
// NAMED-MEMBER:  gpt.mlir: error: E7002: {{.*}}Inputs/nest_named_member.json: nest "SelfAttention.apply/%root_hd": @SelfAttention.apply has no nest there
// FIELD:         gpt.mlir: error: E7002: {{.*}}Inputs/nest_field.json: nest "SelfAttention.apply/%0": @SelfAttention.apply has no nest there ({{.*}}); its nests are SelfAttention.apply/%4, SelfAttention.apply/%6, SelfAttention.apply/%7, SelfAttention.apply/%9, SelfAttention.apply/%10, SelfAttention.apply/%12, SelfAttention.apply/%13, SelfAttention.apply/%14, SelfAttention.apply/%15, SelfAttention.apply/%16, SelfAttention.apply/%17, SelfAttention.apply/%18, SelfAttention.apply/%19, SelfAttention.apply/%21{{$}}
// SPLIT-VIEW:    gpt.mlir: error: E7002: {{.*}}Inputs/nest_split_view.json: nest "SelfAttention.apply/%5": @SelfAttention.apply has no nest there
// MERGE-VIEW:    gpt.mlir: error: E7002: {{.*}}Inputs/nest_merge_view.json: nest "SelfAttention.apply/%20": @SelfAttention.apply has no nest there
// CALL:          gpt.mlir: error: E7002: {{.*}}Inputs/nest_call.json: nest "Block.apply/%4": @Block.apply has no nest there ({{.*}}); its nests are Block.apply/%6, Block.apply/%9{{$}}
// CONSTANT:      gpt.mlir: error: E7002: {{.*}}Inputs/nest_constant.json: nest "LayerNorm.apply/%0": @LayerNorm.apply has no nest there
// ARGUMENT:      gpt.mlir: error: E7002: {{.*}}Inputs/nest_argument.json: nest "SelfAttention.apply/%x": @SelfAttention.apply has no nest there
// PAST-END:      gpt.mlir: error: E7002: {{.*}}Inputs/nest_past_the_end.json: nest "SelfAttention.apply/%99": @SelfAttention.apply has no nest there
// SECOND:        gpt.mlir: error: E7002: {{.*}}Inputs/nest_second_of_two.json: nest "LayerNorm.apply/%9": @LayerNorm.apply has no nest there

// NO-SLASH:      gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_no_slash.json: nest "SelfAttention.apply%4": a nest is named "<function>/%<n>", the binding as `presk dump --stage core` prints it
// NO-PERCENT:    gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_no_percent.json: nest "SelfAttention.apply/4": a nest is named "<function>/%<n>"
// FUNCTION-ONLY: gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_function_only.json: nest "SelfAttention.apply": a nest is named "<function>/%<n>"
// BINDING-ONLY:  gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_binding_only.json: nest "%4": a nest is named "<function>/%<n>"
// NO-FUNCTION:   gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_no_function.json: nest "/%4": a nest is named "<function>/%<n>"
// EMPTY:         gpt.mlir: error: E7002: {{.*}}Inputs/nest_name_empty.json: nest "": a nest is named "<function>/%<n>"

// ACCEPTED:      builtin.module attributes {psk_realize.default = "f32", psk_realize.profile = "out/profile.json"}
// ACCEPTED:      psk_realize.nest "LayerNorm.apply/%1" realize <f32, f32> layout <split = {depth = 0, workers = 2}> : !Stat
// ACCEPTED:      psk_realize.group "LayerNorm.apply/%11" realize <f32, f32> layout <split = "none"> : !H
// ACCEPTED:      psk_realize.nest "SelfAttention.apply/%13" realize <f32, f32> layout <tile = [4, 16], kblock = 32, order = "JIK", lanes = 4, split = {depth = 1, workers = 10}, pack = true, default(form = "tiled", epilogue = false)> : !S
// ACCEPTED:      psk_realize.nest "SelfAttention.apply/%17" realize <f32, f32> layout <passes = 2, default(split = "executor")> : !S
// ACCEPTED:      psk_realize.nest "SelfAttention.apply/%18" realize <f32, f32> layout <tile = [2, 8], default({{.*}})> : !Q
// ACCEPTED:      psk_realize.nest "Linear.apply/%2" realize <f32, f32> layout <epilogue = true, default({{.*}})> : !Hid
// ACCEPTED:      psk_realize.nest "Linear.apply_out/%2" realize <f32, f32> layout <tile = [1, 16], epilogue = true, default({{.*}})> : !H

// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// Syntax errors in PSK-Core text and their codes: E1001 syntax, E1002
// unknown operation, E1003 unknown type or dialect, E1004 undefined or
// redefined value or alias, E2002 call to a missing function.
// A parse error points at the token where parsing failed; when the text
// stops early (a missing result type) that is the first token of the next line.

func.func @missing_result_type(%x: !psk_core.tensor<[a: 2]>) {
  %0 = psk_core.exp %x
  // expected-error @+1 {{E1001: Expected ':' before the result type}}
  func.return
}

// -----

func.func @missing_type_after_colon(%x: !psk_core.tensor<[a: 2]>) {
  %0 = psk_core.exp %x :
  // expected-error @+1 {{E1001: type expected}}
  func.return
}

// -----

// expected-error @+1 {{E1001: Expected ':' after an axis name}}
func.func @axis_without_colon(%x: !psk_core.tensor<[a 2]>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: '[' expected}}
func.func @axes_without_brackets(%x: !psk_core.tensor<a: 2>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: identifier expected (an axis size: integer or name)}}
func.func @fractional_size(%x: !psk_core.tensor<[a: 2.5]>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: identifier expected (an axis name)}}
func.func @numeric_axis_name(%x: !psk_core.tensor<[0: 2]>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: Expected ',' before the index range}}
func.func @index_without_range(%m: !psk_core.index<[a: 2]>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: identifier expected (a field name)}}
func.func @record_trailing_comma(%p: !psk_core.record<w: !psk_core.real,>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: Expected ':' after a field name}}
func.func @record_field_without_type(%p: !psk_core.record<w>) {
  func.return
}

// -----

func.func @unknown_op(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E1002: Operation psk_core.frobnicate is not registered}}
  %0 = psk_core.frobnicate %x : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @unknown_dialect_op(%x: !psk_core.real) {
  // expected-error @+1 {{E1002: Operation frob.op is not registered}}
  %0 = frob.op %x : !psk_core.real
  func.return
}

// -----

// expected-error @+1 {{E1003: 'psk_core.tensr' is not registered}}
func.func @unknown_type(%x: !psk_core.tensr<[a: 2]>) {
  func.return
}

// -----

// expected-error @+1 {{E1004: undefined symbol alias '!Undefined'}}
func.func @undefined_alias(%x: !Undefined) {
  func.return
}

// -----

func.func @undefined_value(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E1004: use of undefined value %y}}
  %0 = psk_core.exp %y : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @redefined_value(%x: !psk_core.tensor<[a: 2]>) {
  %0 = psk_core.exp %x : !psk_core.tensor<[a: 2]>
  // expected-error @+1 {{E1004: SSA value %0 is already defined}}
  %0 = psk_core.log %x : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @missing_comma(%x: !psk_core.real) {
  // expected-error @+1 {{E1001: Expected ','}}
  %0 = psk_core.add %x %x : !psk_core.real
  func.return
}

// -----

func.func @where_two_operands(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E1001: 'where' takes 3 operands, got 2}}
  %0 = psk_core.where %x, %x : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @cross_entropy_one_operand(%x: !psk_core.tensor<[v: 4]>) {
  // expected-error @+1 {{E1001: 'cross_entropy' takes 2 operands, got 1}}
  %0 = psk_core.cross_entropy %x [v] : !psk_core.real
  func.return
}

// -----

func.func @softmax_two_axes(%x: !psk_core.tensor<[a: 2, b: 2]>) {
  // expected-error @+1 {{E1001: 'softmax' takes exactly one axis}}
  %0 = psk_core.softmax %x [a, b] : !psk_core.tensor<[a: 2, b: 2]>
  func.return
}

// -----

func.func @reduce_without_axes(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E1001: '[' expected}}
  %0 = psk_core.sum %x : !psk_core.real
  func.return
}

// -----

func.func @reduce_unclosed(%x: !psk_core.tensor<[a: 2]>) {
  // expected-error @+1 {{E1001: ']' expected}}
  %0 = psk_core.sum %x [a : !psk_core.real
  func.return
}

// -----

func.func @ein_without_operand() {
  // expected-error @+1 {{E1001: operand expected}}
  %0 = psk_core.ein : !psk_core.tensor<[a: 2]>
  func.return
}

// -----

func.func @split_without_arrow(%x: !psk_core.tensor<[a: 6]>) {
  // expected-error @+1 {{E1001: Expected '->'}}
  %0 = psk_core.split %x [a, b, c] : !psk_core.tensor<[b: 2, c: 3]>
  func.return
}

// -----

func.func @constant_not_a_number() {
  // expected-error @+1 {{E1001: integer or float literal expected (the constant's value)}}
  %0 = psk_core.constant abc : !psk_core.real
  func.return
}

// -----

func.func @pow_fractional(%x: !psk_core.real) {
  // expected-error @+1 {{E1001: Expected integer literal (the exponent)}}
  %0 = psk_core.pow %x, 2.5 : !psk_core.real
  func.return
}

// -----

func.func @field_unquoted(%p: !psk_core.record<w: !psk_core.real>) {
  // expected-error @+1 {{E1001: string literal expected (a field name)}}
  %0 = psk_core.field %p[w] : !psk_core.real
  func.return
}

// -----

func.func @proj_negative(%t: !psk_core.tuple<!psk_core.real>) {
  // expected-error @+1 {{E1001: Expected integer literal}}
  %0 = psk_core.proj %t[-1] : !psk_core.real
  func.return
}

// -----

func.func @fold_without_symbol(%x: !psk_core.real) {
  // expected-error @+1 {{E1001: expect symbol name}}
  %0 = psk_core.fold Block(%x, %x) : !psk_core.real
  func.return
}

// -----

// expected-error @+1 {{E1001: expect symbol name}}
psk_core.const_dim D = 4

// -----

// expected-error @+1 {{E1001: Expected integer literal}}
psk_core.const_dim @D = 4.5

// -----

func.func @call_missing(%x: !psk_core.real) -> !psk_core.real {
  // expected-error @+1 {{E2002: call to unknown function @nope}}
  %0 = func.call @nope(%x) : (!psk_core.real) -> !psk_core.real
  func.return %0 : !psk_core.real
}

// -----

func.func @return_type(%x: !psk_core.tensor<[a: 2]>) -> !psk_core.real {
  // expected-error @+1 {{E2001: Expected arguments to have the same types as the function output types}}
  func.return %x : !psk_core.tensor<[a: 2]>
}

// -----

// The names written in split, merge and record must be those of the result
// type; the error points at the names.
func.func @split_names(%x: !psk_core.tensor<[a: 6]>) {
  // expected-error @+1 {{E1001: 'split' names [b, c] but the result type has ['b', 'd']}}
  %0 = psk_core.split %x [a -> b, c] : !psk_core.tensor<[b: 2, d: 3]>
  func.return
}

// -----

func.func @merge_name(%x: !psk_core.tensor<[a: 2, b: 3]>) {
  // expected-error @+1 {{E1001: 'merge' into 'c' but the result type has 'd' there}}
  %0 = psk_core.merge %x [a, b -> c] : !psk_core.tensor<[d: 6]>
  func.return
}

// -----

func.func @record_names(%x: !psk_core.real) {
  // expected-error @+1 {{E1001: 'record' names fields ['a'] but its type has ['b']}}
  %0 = psk_core.record a = %x : !psk_core.record<b: !psk_core.real>
  func.return
}

// -----

func.func @constant_exponent_without_dot() {
  // expected-error @+1 {{E1001: 'e16' after a number: a float has a '.' before its exponent, e.g. 1.0e16}}
  %0 = psk_core.constant 1e16 : !psk_core.real
  func.return
}

// -----

func.func @constant_exponent_keeps_the_mantissa() {
  // expected-error @+1 {{E1001: 'e5' after a number: a float has a '.' before its exponent, e.g. 2.0e5}}
  %0 = psk_core.constant 2e5 : !psk_core.real
  func.return
}

// -----

func.func @size_not_a_name() {
  // expected-error @+1 {{E1001: identifier expected (a size name)}}
  %0 = psk_core.size 3 : !psk_core.real
  func.return
}

// -----

// Size names are what --dim and size expressions can bind: no dots.
// expected-error @+1 {{E1001: size name 'B.x': names of sizes are letters, digits and '_'}}
func.func @dotted(%x: !psk_core.tensor<[batch: B.x]>) {
  func.return
}

// -----

// expected-error @+1 {{E1001: size name 'K.v': names of sizes are letters, digits and '_'}}
psk_core.const_dim @K.v = 4

func.func @ok(%a: i32) -> i32 {
  // expected-error @+1 {{E2001: this error never happens}}
  func.return %a : i32
}

// -----

func.func @bad(%a: i32) -> i64 {
  func.return %a : i32
}

// -----

func.func @wrong_line(%a: i32) -> i64 {
  // expected-error {{E2001}}
  func.return %a : i32
}

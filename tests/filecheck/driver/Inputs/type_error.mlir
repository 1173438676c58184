// A function whose return does not match its signature.
func.func @f(%a: i32) -> i64 {
  func.return %a : i32
}

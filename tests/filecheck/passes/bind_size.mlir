// RUN: presk-opt %s -p 'psk-bind{consts="D=16"}' | filecheck %s

// `psk_core.size` of a bound size becomes the constant it names.
psk_core.const_dim @D = 64
psk_core.const_dim @HD = "D / 2"

func.func @scale() -> !psk_core.real {
  %hd = psk_core.size HD : !psk_core.real
  func.return %hd : !psk_core.real
}

// CHECK:      %hd = psk_core.constant 8.0 : !psk_core.real
// CHECK-NEXT: func.return %hd : !psk_core.real

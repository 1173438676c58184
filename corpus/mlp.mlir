// A two-layer perceptron (Linear, GELU, Linear) and its mean squared error.
// Functions are monomorphic, so the two layers, in -> hidden and
// hidden -> out, are two functions of one form: x . w + b.

!X    = !psk_core.tensor<[batch: B, feature: D_IN]>
!Hid  = !psk_core.tensor<[batch: B, hidden: D_HID]>
!Y    = !psk_core.tensor<[batch: B, out: D_OUT]>
!W1   = !psk_core.tensor<[feature: D_IN, hidden: D_HID]>
!B1   = !psk_core.tensor<[hidden: D_HID]>
!W2   = !psk_core.tensor<[hidden: D_HID, out: D_OUT]>
!B2   = !psk_core.tensor<[out: D_OUT]>
!Lin1 = !psk_core.record<w: !W1, b: !B1>
!Lin2 = !psk_core.record<w: !W2, b: !B2>
!MLP  = !psk_core.record<fc1: !Lin1, fc2: !Lin2>
!R    = !psk_core.real

psk_core.const_dim @D_IN = 8
psk_core.const_dim @D_HID = 32
psk_core.const_dim @D_OUT = 4

// The hidden layer: [batch, feature] -> [batch, hidden].
func.func @Linear.apply(%p: !Lin1, %x: !X) -> !Hid {
  %0 = psk_core.field %p["w"] : !W1
  %1 = psk_core.field %p["b"] : !B1
  %2 = psk_core.dot %x, %0 : !Hid
  %3 = psk_core.add %2, %1 : !Hid
  func.return %3 : !Hid
}

// The output layer: [batch, hidden] -> [batch, out].
func.func @Linear.apply_out(%p: !Lin2, %h: !Hid) -> !Y {
  %0 = psk_core.field %p["w"] : !W2
  %1 = psk_core.field %p["b"] : !B2
  %2 = psk_core.dot %h, %0 : !Y
  %3 = psk_core.add %2, %1 : !Y
  func.return %3 : !Y
}

func.func @MLP.apply(%params: !MLP, %x: !X) -> !Y {
  %0 = psk_core.field %params["fc1"] : !Lin1
  %1 = psk_core.field %params["fc2"] : !Lin2
  %2 = func.call @Linear.apply(%0, %x) : (!Lin1, !X) -> !Hid
  %3 = psk_core.gelu %2 : !Hid
  %4 = func.call @Linear.apply_out(%1, %3) : (!Lin2, !Hid) -> !Y
  func.return %4 : !Y
}

// The mean over batch and outputs of (MLP(x) - y)^2.
func.func @mse(%params: !MLP, %x: !X, %y: !Y) -> !R {
  %0 = func.call @MLP.apply(%params, %x) : (!MLP, !X) -> !Y
  %1 = psk_core.sub %0, %y : !Y
  %2 = psk_core.pow %1, 2 : !Y
  %3 = psk_core.mean %2 [batch, out] : !R
  func.return %3 : !R
}

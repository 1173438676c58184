// RUN: presk-opt %s --split-input-file --verify-diagnostics
//
// A constant size given by an expression must not be able to be 0.
//
// The verifier refuses a 0 in a size expression (E2001); sizes bound at run
// time are positive by construction, so no division by 0 is left.

// expected-error @+1 {{E2001: size expression}}
psk_core.const_dim @Z = "D / 0"

// -----

// expected-error @+1 {{E2001: size expression}}
psk_core.const_dim @Z = "0 * D"

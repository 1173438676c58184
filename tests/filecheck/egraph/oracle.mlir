// The reference interpreter's outputs at 128 bits are the same bytes with and without --opt, axis
// names included: the rules are exact over the reals, so the roundings they move lie far below the
// digits printed. (In f64 they do not always: docs/egraph.md §8.)
//
// The attention, whose scale the rewrite moves onto the queries:
// RUN: presk run %S/../../../corpus/attention.mlir --entry SelfAttention.apply --dim B=1 --dim T=3 --bits 128 --print-values > %t.attention
// RUN: presk run %S/../../../corpus/attention.mlir --entry SelfAttention.apply --dim B=1 --dim T=3 --bits 128 --print-values --opt 2>/dev/null > %t.attention.opt
// RUN: diff %t.attention %t.attention.opt
// RUN: filecheck %s --check-prefix=ATTENTION < %t.attention.opt
//
// GELU's derivative, where `distribute` changes the f64 result's last digit:
// RUN: presk run %S/../autodiff/derivative_in_forward.mlir --entry grad --pass-pipeline='builtin.module(psk-autodiff)' --bits 128 --print-values > %t.gelu
// RUN: presk run %S/../autodiff/derivative_in_forward.mlir --entry grad --pass-pipeline='builtin.module(psk-autodiff)' --bits 128 --print-values --opt 2>/dev/null > %t.gelu.opt
// RUN: diff %t.gelu %t.gelu.opt
//
// MiniGPT's loss, and the course GPT's loss and gradient (its adjoints rewritten too):
// RUN: presk run %S/../../../corpus/minigpt.mlir --entry loss --dim B=1 --dim T=4 --const D=8 --const C=8 --bits 128 --print-values > %t.minigpt
// RUN: presk run %S/../../../corpus/minigpt.mlir --entry loss --dim B=1 --dim T=4 --const D=8 --const C=8 --bits 128 --print-values --opt 2>/dev/null > %t.minigpt.opt
// RUN: diff %t.minigpt %t.minigpt.opt
// RUN: filecheck %s --check-prefix=MINIGPT < %t.minigpt.opt
// RUN: presk run %S/../../../corpus/nlp/gpt.mlir --entry loss_grad --dim B=1 --dim T=3 --const D=8 --const H=2 --const L=1 --const C=4 --const V=8 --bits 128 --print-values > %t.gpt
// RUN: presk run %S/../../../corpus/nlp/gpt.mlir --entry loss_grad --dim B=1 --dim T=3 --const D=8 --const H=2 --const L=1 --const C=4 --const V=8 --bits 128 --print-values --opt 2>%t.gpt.report > %t.gpt.opt
// RUN: diff %t.gpt %t.gpt.opt
// RUN: filecheck %s --check-prefix=GPT < %t.gpt.opt
// RUN: filecheck %s --check-prefix=REPORT < %t.gpt.report

// ATTENTION: @SelfAttention.apply (mpmath, 128 bits):
// ATTENTION-NEXT: result 0: tensor[batch: B, seq: T, embed: D]
// ATTENTION-NEXT: shape (1, 3, 16)
// ATTENTION-NEXT: {{\[\[\[}} -6.574357635051292    5.719411966475837   14.045961647787449

// MINIGPT: @loss (mpmath, 128 bits):
// MINIGPT-NEXT: result 0: real
// MINIGPT-NEXT: 9.27958869361873147621043224913094974268

// GPT: @loss_grad (mpmath, 128 bits):
// GPT: value: 2.08173994362928242320816085882246566687

// The rewrite did change the gradient's program:
// REPORT: psk-egraph-opt: {{[1-9][0-9]*}} of {{[0-9]+}} functions changed

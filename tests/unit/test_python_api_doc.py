"""docs/python-api.md is generated from the op definitions and matches them (issue 14, fault 4)."""

from __future__ import annotations

import difflib

from presk.cli.opdoc import DOC_PATH, generate, registered_dialects


def test_the_committed_document_is_the_generated_one() -> None:
    committed = DOC_PATH.read_text(encoding="utf-8")
    generated = generate()
    if committed != generated:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True), generated.splitlines(keepends=True), "committed", "generated", n=1
            )
        )
        raise AssertionError(
            "docs/python-api.md is out of date; regenerate it with `python -m presk.cli.opdoc --write`:\n" + diff
        )


def test_every_op_of_every_dialect_is_documented_with_names_it_really_has() -> None:
    text = generate()
    for dialect in registered_dialects():
        for op in dialect.operations:
            section = text.split(f"### `{op.name}`: `{op.__name__}`\n", 1)
            assert len(section) == 2, f"{op.name} is not documented"
            body = section[1].split("\n### ", 1)[0]
            definition = op.get_irdl_definition()
            names = [name for name, _ in (*definition.operands, *definition.results, *definition.regions)]
            names += [name for name in definition.properties if name != "operandSegmentSizes"]
            for name in names:
                assert f"| `op.{name}` |" in body, f"{op.name}: {name} is missing"
                # The accessor xDSL puts on the class (it cannot be read from the class itself).
                assert any(name in vars(cls) for cls in op.__mro__), f"{op.name} has no accessor {name}"
            assert f"Builder: `{op.__name__}(" in body or f"Builder (xDSL's generic one): `{op.__name__}(" in body


def test_what_the_tutorial_relies_on_is_there() -> None:
    text = generate()
    assert "| `op.operand` | operand | SSAValue |" in text.split("### `psk_core.neg`: `NegOp`", 1)[1].split("###")[0]
    constant = text.split("### `psk_core.constant`: `ConstantOp`", 1)[1].split("###")[0]
    assert "| `op.value` | property | FloatAttr[FloatData, Float64Type] |" in constant
    assert "Builder: `ConstantOp(value: float, result_type: Attribute | None = None)`" in constant
    mul = text.split("### `psk_core.mul`: `MulOp`", 1)[1].split("###")[0]
    assert "Builder: `MulOp(lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None)`" in mul

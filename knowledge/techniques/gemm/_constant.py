"""Structural techniques retuned through one constant of the config region: the structure goes in
once (grouped order, XCD remap, persistent loop, split-K), and from then on a form only sets its
constant (GROUP_M, NUM_XCDS, NUM_SMS, SPLIT_K)."""

from __future__ import annotations

from typing import ClassVar

from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._base import Form, Technique
from kernel_scientist.knowledge._regions import body, has, read_tunables, require, set_constant


class ConstantStructure(Technique):
    """Subclasses say where the structure lives (``needs``, ``marker``), how it goes in
    (``_install``) and which values of ``constant`` they offer; ``changes`` are the forms' code
    changes in words, with ``{value}`` for the constant's value."""

    constant: ClassVar[str]
    values: ClassVar[tuple[int, ...]]  # one form each, in this order
    accepted: ClassVar[tuple[int, ...]] = ()  # what ``apply`` takes beyond ``values``
    needs: ClassVar[tuple[str, ...]]  # the regions every kernel it can change has
    # Where the structure shows: (region, text) where that region's body holds the text,
    # (region, None) where the region itself is the structure.
    marker: ClassVar[tuple[str, str | None]]
    changes: ClassVar[tuple[str, ...]]
    default: ClassVar[int | None] = None  # the constant's value where the config does not set it

    def _install(self, source: str, value: int) -> str:
        """``source`` with the structure inserted and the constant set to ``value``."""
        raise NotImplementedError

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, *self.needs, why=self.name)
        region, text = self.marker
        if not (has(source, region) if text is None else text in "\n".join(body(source, region))):
            return None
        value = read_tunables(source).get(self.constant, self.default)
        return None if value is None else {self.constant: value}

    def forms(self, source: str) -> list[Form]:
        return [
            Form(
                {self.constant: value}, f"{self.constant}={value}", [text.format(value=value) for text in self.changes]
            )
            for value in self.values
        ]

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        value = self._param(params, self.constant, self.values + self.accepted)
        if self.detect(source) is not None:
            return set_constant(source, self.constant, value)
        return self._install(source, value)

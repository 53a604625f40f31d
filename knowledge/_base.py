"""The technique interface: a named, executable rewrite of a submission's source.

A technique is offline knowledge turned into code: ``variants`` lists the concrete forms that make
sense for a given kernel (never a no-op, never a form already applied), and ``apply`` returns a new
complete submission. Transformations work on comment-delimited regions of the source (see
``_regions``); a kernel without the regions a technique needs is answered with ``NotApplicable``
rather than a guess, because a silently wrong rewrite would waste a scarce GPU evaluation.
"""

from __future__ import annotations

from typing import ClassVar, Literal, NamedTuple, TypeVar, cast

import msgspec
from kernel_scientist.blackboard.records import Param
from kernel_scientist.knowledge._regions import NotApplicable, has, require
from kernel_scientist.knowledge._twin import mirror_into_twin

Category = Literal["tiling", "parallelism", "memory", "precision", "schedule", "tuning", "crossover"]
T = TypeVar("T", bound=Param)  # one type of parameter value


class Variant(msgspec.Struct, frozen=True):
    """One concrete form of a technique, ready for ``Technique.rewrite(source, params)``."""

    technique: str
    params: dict[str, Param]
    label: str  # short, e.g. "BLOCK_M=128, BLOCK_N=128"
    changes: list[str]  # the code changes, in words, for an LLM or a reviewer


class Form(NamedTuple):
    """One form a technique offers, before ``variants`` names it after the technique."""

    params: dict[str, Param]
    label: str
    changes: list[str]


class Technique:
    """Base class of every catalogue entry. Subclasses set the class attributes and override
    ``detect`` and ``apply`` (``Structure`` does both for a technique whose one form shows as one
    region), and say which forms they offer: one ``form``, or ``forms`` of a source (``variants``
    keeps those the source does not have yet); a technique whose forms depend on a reference kernel
    overrides ``variants`` itself."""

    name: ClassVar[str]
    title: ClassVar[str]
    category: ClassVar[Category]
    prose: ClassVar[str]  # literature digest for prompts: what, why on MI300X, when not
    prior_min: ClassVar[float]  # expected fractional score uplift on this task, low end
    prior_max: ClassVar[float]
    novelty: ClassVar[float]  # 0 (textbook tuning) .. 1 (rarely tried)
    vendors: ClassVar[tuple[str, ...]] = ("amd", "nvidia")  # whose hardware it can change anything on
    # Which tasks' kernels it can rewrite: "gemm" (the matrix-product seed's regions and constraints)
    # or "any" (any Triton kernel, found by its syntax). A campaign takes the catalogue of its task's kind.
    kernels: ClassVar[tuple[str, ...]] = ("gemm",)
    form: ClassVar[Form | None] = None  # the only form of a technique that has one
    most: ClassVar[int] = 6  # how many forms ``variants`` offers at the most
    _on_vendor: ClassVar[dict[str, type[Technique]]] = {}  # see ``__init_subclass__``

    def edge(self, params: dict[str, Param]) -> float:
        """How much better (fraction of the score) this form is expected to do than the technique's
        prior says, where one form was measured against another (0 where nothing was)."""
        return 0.0

    def __init_subclass__(cls, replaces_on: str | None = None, **kwargs: object) -> None:
        """``class _Hopper(Persistent, replaces_on="nvidia")`` declares the technique that stands
        for ``Persistent`` on NVIDIA GPUs: what its ``for_vendor("nvidia")`` gives."""
        super().__init_subclass__(**kwargs)
        cls._on_vendor = {}
        if replaces_on is not None:
            parent = cls.__mro__[1]
            assert issubclass(parent, Technique), f"{cls.__name__} replaces no technique"
            parent._on_vendor[replaces_on] = cls

    def for_vendor(self, vendor: str) -> Technique:
        """This technique as it applies to one vendor's GPUs (forms and priors measured there): the
        subclass that replaces it on them, if one does. Most techniques are the same everywhere."""
        replacement = self._on_vendor.get(vendor)
        return self if replacement is None else replacement()

    def detect(self, source: str) -> dict[str, Param] | None:
        """The parameters this technique currently has in ``source``, or None if absent.

        Tunable-only techniques report the current values; structural ones report None until
        their structure has been inserted.
        """
        raise NotImplementedError

    def forms(self, source: str) -> list[Form]:
        """Every form that makes sense for ``source``, the one it has already included (``variants``
        drops that one). By default the technique's one ``form``."""
        if self.form is None:
            raise NotImplementedError(f"{self.name}: neither a form nor forms")
        return [self.form]

    def variants(self, source: str, reference: str | None = None) -> list[Variant]:
        """The forms ``source`` does not have yet, in order, at most ``most``; none where the
        technique does not apply."""
        return self._fresh(source, [self._variant(*form) for form in self.forms(source)], self.most)

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        raise NotImplementedError

    def rewrite(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        """``apply``, with the change also made to stream_k's copy of the GEMM kernel where the copy
        reads as the rewritten part did (a grouped tile order reaches both structures). What the
        engineers and compound plans call; ``apply`` is each technique's own transformation."""
        return mirror_into_twin(source, self.apply(source, params, reference))

    # -- helpers for subclasses -------------------------------------------------------------

    def _variant(self, params: dict[str, Param], label: str, changes: list[str]) -> Variant:
        return Variant(technique=self.name, params=dict(params), label=label, changes=list(changes))

    def _fresh(self, source: str, candidates: list[Variant], limit: int = 6) -> list[Variant]:
        """Drop candidates equal to what ``source`` already has; keep order; cap the count."""
        try:
            current = self.detect(source)
        except NotApplicable:
            return []
        fresh = [v for v in candidates if current is None or not same_params(v.params, current)]
        return fresh[:limit]

    def _has_form(self, source: str, params: dict[str, Param]) -> bool:
        """For a technique with one ``form``: check that ``params`` are that form's, and say whether
        ``source`` has it already (then ``apply`` leaves the source as it is)."""
        assert self.form is not None, f"{self.name} has more than one form"
        for key, value in self.form.params.items():
            self._param(params, key, (value,))
        return self.detect(source) is not None

    def _param(self, params: dict[str, Param], key: str, allowed: tuple[T, ...]) -> T:
        """``params[key]``, which must be one of ``allowed`` (so it has their type)."""
        if key not in params:
            raise NotApplicable(f"{self.name}: missing parameter {key!r} (allowed values {allowed})")
        value = params[key]
        if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed):
            raise NotApplicable(f"{self.name}: {key}={value!r} is not one of {allowed}")
        return cast(T, value)

    def __repr__(self) -> str:
        return f"<technique {self.name}>"


class Structure(Technique):
    """A technique with one ``form`` whose structure, once in, shows as region ``mark``. ``detect``
    checks that the kernel has the regions the technique works on (``needs``), reports the form
    where the mark is and otherwise lets ``refuse`` say why the structure cannot go in; ``apply``
    leaves a kernel that has the structure as it is and otherwise ``install``s it."""

    mark: ClassVar[str]
    needs: ClassVar[tuple[str, ...]]

    def refuse(self, source: str) -> None:
        """Raise NotApplicable where the structure cannot go into ``source`` (by default it can)."""

    def install(self, source: str) -> str:
        """``source`` with the structure in."""
        raise NotImplementedError

    def detect(self, source: str) -> dict[str, Param] | None:
        require(source, *self.needs, why=self.name)
        if has(source, self.mark):
            assert self.form is not None, f"{self.name} has no form"
            return dict(self.form.params)
        self.refuse(source)
        return None

    def apply(self, source: str, params: dict[str, Param], reference: str | None = None) -> str:
        if self._has_form(source, params):
            return source
        return self.install(source)


def same_params(params: dict[str, Param], current: dict[str, Param]) -> bool:
    """Does ``current`` (what ``detect`` found) hold every one of ``params``?"""
    return all(current.get(key) == value for key, value in params.items())

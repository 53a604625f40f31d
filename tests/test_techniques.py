"""Every technique of the catalogue yields a correct submission, alone and composed.

Kernels run in Triton's CPU interpreter. Known interpreter limitation: a bf16 ``tl.dot`` returns
garbage there (stack notes), so the bf16-upcast precision variant is only run, not checked.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from kernel_scientist.evaluator import static_findings
from kernel_scientist.knowledge import NotApplicable, Variant
from kernel_scientist.knowledge._regions import read_tunables
from test_task import TASK, load_submission, reference

from kernel_scientist import knowledge

SEED = (TASK / "submission.py").read_text()
# m = 96 (not a multiple of 64-row tiles), n % 128 == 64, 2 and 4 K blocks.
SHAPES = [(96, 192, 256), (64, 128, 512)]
INTERPRETER_GARBAGE = {("accumulation_precision", "bf16_upcast")}


def as_fnuz(data):
    """The same problem with a and b in e4m3fnuz, as the public generator draws them on every
    platform (the values are exactly representable in both flavours); still column-major."""
    a, b, a_scale, b_scale, c = data
    return (a.T.float().to(torch.float8_e4m3fnuz).T, b.T.float().to(torch.float8_e4m3fnuz).T, a_scale, b_scale, c)


def _checks(source: str, folder: Path, name: str, shapes=SHAPES) -> None:
    """Correct on each shape, and on the first again with e4m3fnuz operands (the seed's
    fp8_flavour region, which every technique keeps, reinterprets them off ROCm)."""
    module = load_submission(source, folder, name)
    for shape, flavour in [(s, "fn") for s in shapes] + [(shapes[0], "fnuz")]:
        data = reference.generate_input(*shape, seed=shape[0] + shape[2], device="cpu")
        if flavour == "fnuz":
            data = as_fnuz(data)
        ok, message = reference.check_implementation(data, module.custom_kernel(data))
        assert ok, f"{name} {shape} {flavour}: {message[:300]}"


def _cpu_checkable(variant: Variant) -> bool:
    return (variant.technique, variant.params.get("mode")) not in INTERPRETER_GARBAGE


def _all_variants() -> list[Variant]:
    return [v for t in knowledge.catalogue() for v in t.variants(SEED)]


def test_catalogue_shape():
    items = knowledge.catalogue()
    names = [t.name for t in items]
    assert len(items) >= 12 and len(set(names)) == len(names)
    assert names == [t.name for t in knowledge.catalogue()]  # deterministic order
    for item in items:
        assert item.category in ("tiling", "parallelism", "memory", "precision", "schedule", "tuning", "crossover")
        assert item.prior_min <= item.prior_max and 0 <= item.novelty <= 1
        assert 3 <= item.prose.count(". ") + 1 <= 10
        assert knowledge.technique(item.name) is item
    with pytest.raises(KeyError, match="tile_shape"):
        knowledge.technique("no_such_thing")


def test_the_catalogue_per_vendor():
    amd = [t.name for t in knowledge.catalogue("amd")]
    nvidia = {t.name: t for t in knowledge.catalogue("nvidia")}
    assert amd == [t.name for t in knowledge.catalogue() if "amd" in t.vendors]
    assert {"amd_knobs", "xcd_remap"} <= set(amd) and not {"amd_knobs", "xcd_remap"} & set(nvidia)
    hopper = nvidia["accumulation_precision"]
    assert hopper.prior_min >= 0 and "Hopper" in hopper.prose
    # On Hopper only the forms that can pass a tight tolerance are offered, fp16 first.
    assert [v.params["mode"] for v in hopper.variants(SEED)] == ["fp16_upcast", "bf16_upcast"]
    fp16 = hopper.apply(SEED, {"mode": "fp16_upcast"})
    assert "tl.dot(a.to(tl.float16), b.to(tl.float16))" in fp16 and hopper.detect(fp16) == {"mode": "fp16_upcast"}
    with pytest.raises(NotApplicable, match="mode='fast'"):
        hopper.apply(SEED, {"mode": "fast"})
    layout = nvidia["layout_prepass"]
    copied = layout.apply(SEED, {"operands": "ab"})
    undone = layout.apply(copied, {"operands": "none"})
    assert "contiguous()" not in undone.split("# region: layout")[1].split("# endregion: layout")[0]
    assert [v.label for v in layout.variants(copied)][0] == "no K-contiguous copies"
    hopper_only = {"fp16_prepass", "tma_descriptors", "warp_specialize", "scale_fold"}
    assert hopper_only <= set(nvidia) and not hopper_only & set(amd)
    assert nvidia["persistent"].variants(SEED)[0].params == {"NUM_SMS": 132}
    tuner = {t.name: t for t in knowledge.catalogue("amd")}["in_submission_tuning"]
    assert "do_not_specialize" not in tuner.apply(SEED, {"space": "tiles3"})  # the MI300X form is unchanged
    assert "do_not_specialize" in nvidia["in_submission_tuning"].apply(SEED, {"space": "tiles3"})
    # No measured per-shape table anywhere in the catalogue's source.
    for path in (Path(knowledge.__file__).parent / "techniques").glob("*.py"):
        assert "(1024, 1536, 7168)" not in path.read_text() and "measured_point" not in path.read_text()


HOPPER_CHAIN = [
    ("fp16_prepass", {"operands": "fp16"}),
    ("tma_descriptors", {"tma": True}),
    ("persistent", {"NUM_SMS": 132}),
    ("warp_specialize", {"warp_specialize": True}),
    ("scale_fold", {"fold": True}),
    ("lean_host", {"launch": "compiled"}),
    ("in_submission_tuning", {"space": "tiles6"}),
]


def test_the_hopper_pipeline_runs_in_the_interpreter(tmp_path):
    """The structure a Hopper campaign builds step by step: each step is detected afterwards, the
    steps it excludes are no longer offered, and the kernel passes the check (CPU interpreter:
    descriptors, the warp-specialised loop and the JIT launch fallback all run there)."""
    nvidia = {t.name: t for t in knowledge.catalogue("nvidia")}
    source = SEED
    for name, params in HOPPER_CHAIN:
        source = nvidia[name].apply(source, params)
        assert nvidia[name].detect(source) == params
        assert all(v.params != params for v in nvidia[name].variants(source))
    assert nvidia["accumulation_precision"].variants(source) == []  # the dot multiplies fp16 already
    # The kernel tunes itself: a retune sets its default (what runs without a GPU) and adds that
    # setting to the ones its tuner times, once.
    space = next(line for line in source.splitlines() if line.startswith("TUNING_SPACE = "))
    warps = read_tunables(source)["NUM_WARPS"]
    staged = nvidia["num_stages"].apply(source, {"num_stages": 1})
    tiles = nvidia["tile_shape"].apply(staged, {"BLOCK_M": 32, "BLOCK_N": 64})
    assert nvidia["num_stages"].detect(staged) == {"num_stages": 1}
    assert nvidia["tile_shape"].detect(tiles) == {"BLOCK_M": 32, "BLOCK_N": 64}
    first = (read_tunables(source)["BLOCK_M"], read_tunables(source)["BLOCK_N"], warps, 1)
    added = [line for line in tiles.splitlines() if line.startswith("TUNING_SPACE = ")]
    assert added == [space[:-1] + f", {first}, {(32, 64, warps, 1)})"]
    assert nvidia["num_stages"].apply(tiles, {"num_stages": 1}) == tiles  # there already: unchanged
    assert nvidia["in_submission_tuning"].detect(tiles) == {"space": "custom"}
    with pytest.raises(NotApplicable, match="layout is fixed"):
        nvidia["layout_prepass"].apply(source, {"operands": "ab"})
    assert "tl.make_tensor_descriptor" in source and "warp_specialize=True" in source
    # The tuner's settings compile once each, whatever the divisibility of the scales' K-block strides.
    assert "@triton.jit(do_not_specialize=['stride_ask', 'stride_bsk'])\ndef fp8_gemm_kernel(" in source
    _checks(source, tmp_path, "hopper", shapes=SHAPES + [(128, 320, 384)])
    module = load_submission(source, tmp_path, "hopper2")
    for _ in range(2):  # the second call of a shape takes the cached settings and launch path
        data = reference.generate_input(64, 128, 256, seed=5, device="cpu")
        ok, message = reference.check_implementation(data, module.custom_kernel(data))
        assert ok, message[:300]
    with pytest.raises(NotApplicable, match="persistent"):
        nvidia["warp_specialize"].apply(SEED, {"warp_specialize": True})
    # And back: the plain persistent loop is offered again and still passes.
    plain = nvidia["warp_specialize"].apply(source, {"warp_specialize": False})
    assert "warp_specialize=True" not in plain and nvidia["warp_specialize"].detect(plain) == {"warp_specialize": False}
    assert [v.params for v in nvidia["warp_specialize"].variants(plain)] == [{"warp_specialize": True}]
    _checks(plain, tmp_path, "hopper_plain", shapes=SHAPES[:1])


def test_with_the_prepass_a_fnuz_call_makes_no_torch_op_but_views(tmp_path):
    """The seed's fp8_flavour makes a scale op per call on e4m3fnuz inputs (the public
    generator's), which costs a launch and stops launch replay (it replays only calls made of
    launches and dtype views). With the fp16 pre-pass the conversion halves the operands itself:
    after the first call of a shape, the call's Python makes only the two views, and is exact."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    nvidia = {t.name: t for t in knowledge.catalogue("nvidia")}
    seed_module = load_submission(SEED, tmp_path, "flavour_seed")
    source = nvidia["fp16_prepass"].apply(SEED, {"operands": "fp16"})
    assert "a_scale * 0.25" not in source and "to_fp16(a, b, halving)" in source
    _checks(source, tmp_path, "flavour_checked", shapes=SHAPES[:1])  # exact, fnuz included
    module = load_submission(source, tmp_path, "flavour_prepass")

    class Unlaunched:  # a kernel whose launches do nothing: what is left is the call's own Python
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    seen = {}
    for label, mod in (("seed", seed_module), ("prepass", module)):
        for name in ("fp8_gemm_kernel", "fp8_to_fp16_kernel"):
            if hasattr(mod.module, name):
                setattr(mod.module, name, Unlaunched())
        for i in range(2):
            data = as_fnuz(reference.generate_input(64, 128, 256, seed=7 + i, device="cpu"))
            with Ops() as ops:
                mod.custom_kernel(data)
        seen[label] = ops.names  # the second call's torch ops
    assert "aten.mul.Tensor" in seen["seed"]
    assert set(seen["prepass"]) == {"aten.view.dtype", "aten.detach.default"}  # the aliases replay skips
    # An input that is already e4m3fn goes through untouched.
    data = reference.generate_input(64, 128, 256, seed=9, device="cpu")
    with Ops() as ops:
        module.custom_kernel(data)
    assert ops.names == []


def test_scale_fold_takes_one_b_scale_per_tile_and_keeps_wide_tiles_exact(tmp_path):
    """The folded form runs where BLOCK_N divides 128 (the seed's 64, and 128); a 256-wide tile
    spans two of b's scale blocks and takes the general branch. Both pass, also where n % 128 == 64
    (the last tile's columns past n wrap and are dropped)."""
    fold = knowledge.technique("scale_fold")
    source = fold.apply(SEED, {"fold": True})
    assert fold.detect(source) == {"fold": True} and fold.variants(source) == []
    assert "acc += partial * (a_s * b_one)[:, None]" in source and "if 128 % BLOCK_N == 0:" in source
    from kernel_scientist.knowledge._regions import set_constant

    for block_n in (64, 128, 256):
        _checks(set_constant(source, "BLOCK_N", block_n), tmp_path, f"fold{block_n}", shapes=[(96, 576, 256)])
    with pytest.raises(NotApplicable, match="no `acc"):
        fold.apply(
            SEED.replace("acc += partial * a_s[:, None] * b_s[None, :]", "acc += partial * a_s[:, None]"),
            {"fold": True},
        )


def test_hopper_split_k_picks_the_split_per_shape_and_reduces_in_the_launch(tmp_path):
    """NVIDIA's split_k: the split comes from the shape (one slice where the tiles fill the GPU),
    the last slice of each tile adds the fp32 planes in the same launch, and the per-tile counters
    are back at zero after every call (the second and third calls are right too). On the
    interpreter the GPU has 4 "SMs", so a long K with few tiles splits."""
    nvidia = {t.name: t for t in knowledge.catalogue("nvidia")}
    split = nvidia["split_k"]
    assert type(split) is not type(knowledge.technique("split_k"))  # the AMD form keeps the host reduction
    plain = split.apply(SEED, {"SPLIT_K_MAX": 4})
    assert split.detect(plain) == {"SPLIT_K_MAX": 4} and "c.copy_" not in plain
    chain = SEED
    for name, params in HOPPER_CHAIN[:3] + [("split_k", {"SPLIT_K_MAX": 4}), ("scale_fold", {"fold": True})]:
        chain = nvidia[name].apply(chain, params)
    chain = nvidia["launch_replay"].apply(nvidia["lean_host"].apply(chain, {"launch": "compiled"}), {"replay": True})
    for index, source in enumerate((plain, chain)):
        assert not [f for f in static_findings(source) if f.severity == "reject"], static_findings(source)
        namespace = load_submission(source, tmp_path, f"split_module_{index}").module
        plan = namespace.split_plan
        cfg = dict(namespace.select_config(64, 128, 1024), BLOCK_K=128)
        assert plan(64, 128, 1024, cfg, torch.device("cpu"))[0] == 2  # 2 tiles, 8 K blocks, 4 SMs
        assert plan(256, 256, 256, cfg, torch.device("cpu"))[0] == 1  # 16 tiles fill 4 SMs
    for label, source in (("plain", plain), ("chain", chain)):
        module = load_submission(source, tmp_path, f"split_{label}")
        for shape in ((64, 128, 1024), (64, 576, 2048), (96, 192, 256)):
            data = reference.generate_input(*shape, seed=shape[2], device="cpu")
            for _ in range(3):
                ok, message = reference.check_implementation(data, module.custom_kernel(data))
                assert ok, f"{label} {shape}: {message[:300]}"
    # Warp specialisation runs the epilogue per consumer warpgroup: the counter would count twice.
    with pytest.raises(NotApplicable, match="once per consumer warpgroup"):
        nvidia["warp_specialize"].apply(chain, {"warp_specialize": True})
    specialised = nvidia["warp_specialize"].apply(
        nvidia["persistent"].apply(SEED, {"NUM_SMS": 132}), {"warp_specialize": True}
    )
    with pytest.raises(NotApplicable, match="once per consumer warpgroup"):
        split.apply(specialised, {"SPLIT_K_MAX": 4})
    with pytest.raises(NotApplicable, match="host-side reduction"):
        split.apply(knowledge.technique("split_k").apply(SEED, {"SPLIT_K": 2}), {"SPLIT_K_MAX": 4})


def test_compound_plans_compose_and_predict_once(tmp_path):
    nvidia = {t.name: t for t in knowledge.catalogue("nvidia")}
    compound = nvidia["compound"]
    offered = compound.variants(SEED)
    assert offered and all(2 <= len(json.loads(v.params["steps"])) <= 3 for v in offered)
    for variant in offered:
        steps = json.loads(variant.params["steps"])
        stepwise = SEED
        for name, params in steps:
            stepwise = nvidia[name].apply(stepwise, params)
        assert compound.apply(SEED, variant.params) == stepwise
        # One prediction: the steps' priors combined, so the brain sees more than any step alone.
        assert compound.edge(variant.params) > 0
    # A step that a later one undoes (the pre-pass replaces the precision form) is no compound.
    assert not any("mode=" in v.label and "pre-pass" in v.label for v in offered)
    first = json.loads(offered[0].params["steps"])
    assert {name for name, _ in first} <= set(nvidia) - {"tile_shape", "num_warps", "num_stages"}
    _checks(compound.apply(SEED, offered[0].params), tmp_path, "compound")
    for bad in ({"steps": "[]"}, {"steps": "not json"}, {"steps": '[["nope", {}], ["persistent", {}]]'}, {}):
        with pytest.raises(NotApplicable):
            compound.apply(SEED, bad)


def test_read_tunables_of_the_seed():
    assert knowledge.read_tunables(SEED) == {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "BLOCK_K": 128,
        "NUM_WARPS": 4,
        "NUM_STAGES": 2,
    }


@pytest.mark.parametrize("variant", _all_variants(), ids=lambda v: f"{v.technique}[{v.label}]")
def test_every_variant_passes(variant, tmp_path):
    item = knowledge.technique(variant.technique)
    source = item.apply(SEED, variant.params)
    assert source != SEED
    compile(source, "variant.py", "exec")
    # The critic's static rules would send a rejected form back before any evaluation.
    assert not [f for f in static_findings(source) if f.severity == "reject"], static_findings(source)
    # The form just applied is not offered again.
    assert all(v.params != variant.params for v in item.variants(source))
    if _cpu_checkable(variant):
        _checks(source, tmp_path, "variant")
    else:
        module = load_submission(source, tmp_path, "variant")
        data = reference.generate_input(64, 64, 128, seed=1, device="cpu")
        assert module.custom_kernel(data).shape == (64, 64)


@pytest.mark.parametrize("trial", range(5))
def test_random_compositions_pass(trial, tmp_path):
    rng = random.Random(1000 + trial)
    # The GEMM techniques (the any-kernel ones in a GEMM task's catalogue refuse the seed's regions).
    pool = [t for t in knowledge.catalogue() if t.category != "crossover" and "any" not in t.kernels]
    source, applied = SEED, []
    wanted = rng.choice((3, 4))
    rng.shuffle(pool)  # drawn until enough apply, so a catalogue that grows keeps the compositions deep
    for item in pool:
        if len(applied) == wanted:
            break
        options = [v for v in item.variants(source) if _cpu_checkable(v)]
        if not options:
            continue
        variant = rng.choice(options)
        source = item.apply(source, variant.params)
        applied.append(f"{item.name}{variant.params}")
    assert len(applied) >= 2, applied
    _checks(source, tmp_path, f"composed{trial}", shapes=SHAPES + [(128, 320, 384)])


def test_structure_survives_every_order(tmp_path):
    steps = [
        ("split_k", {"SPLIT_K": 2}),
        ("persistent", {"NUM_SMS": 304}),
        ("xcd_remap", {"NUM_XCDS": 8}),
        ("grouped_order", {"GROUP_M": 4}),
    ]
    sources = set()
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
        source = SEED
        for index in order:
            name, params = steps[index]
            source = knowledge.technique(name).apply(source, params)
        for name, params in steps:
            assert knowledge.technique(name).detect(source) == params
        sources.add(source)
    _checks(sources.pop(), tmp_path, "ordered")


def test_crossover_adopts_the_references_techniques(tmp_path):
    other = knowledge.technique("split_k").apply(SEED, {"SPLIT_K": 4})
    other = knowledge.technique("tile_shape").apply(other, {"BLOCK_M": 32, "BLOCK_N": 128})
    crossover = knowledge.technique("crossover")
    assert crossover.variants(SEED) == []
    offered = crossover.variants(SEED, reference=other)
    adopted = {v.params["adopt"] for v in offered}
    assert {"tunables", "split_k", "tile_shape"} <= adopted
    merged = crossover.apply(SEED, {"adopt": "split_k"}, reference=other)
    assert knowledge.technique("split_k").detect(merged) == {"SPLIT_K": 4}
    _checks(merged, tmp_path, "crossed")
    with pytest.raises(NotApplicable):
        crossover.apply(other, {"adopt": "split_k"}, reference=other)


def test_source_without_regions_is_not_applicable():
    """The GEMM techniques need the seed's regions; a GEMM kernel without them (a user's own) is
    what the any-kernel techniques in a GEMM task's catalogue rewrite, and they refuse the seed."""
    bare = "\n".join(line for line in SEED.splitlines() if "region" not in line) + "\n"
    for item in knowledge.catalogue():
        if "any" in item.kernels:
            assert item.variants(SEED) == []
            with pytest.raises(NotApplicable, match="GEMM seed's regions"):
                item.detect(SEED)
            continue
        assert item.variants(bare, reference=SEED if item.name != "crossover" else None) == []
        params = dict(item.variants(SEED)[0].params) if item.variants(SEED) else {"adopt": "tunables"}
        with pytest.raises(NotApplicable):
            item.apply(bare, params)
    offered = {item.name for item in knowledge.catalogue() if "any" in item.kernels and item.variants(bare)}
    assert {"block_size", "cache_hints"} <= offered


def test_bad_parameters_are_not_applicable():
    with pytest.raises(NotApplicable, match="BLOCK_M"):
        knowledge.technique("tile_shape").apply(SEED, {"BLOCK_M": 48, "BLOCK_N": 64})
    with pytest.raises(NotApplicable, match="SPLIT_K"):
        knowledge.technique("split_k").apply(SEED, {})


def test_documents_load():
    docs = knowledge.documents()
    assert 4 <= len(docs) <= 8
    assert all(doc.title and len(doc.text) > 500 for doc in docs)

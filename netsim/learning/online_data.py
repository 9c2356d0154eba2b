"""Binary data streams for distributed online learning (DOLA).

Li, Zhou, Chen and Jiang, *Differentially Private Distributed Online Learning* (arXiv 2017,
§6), and Li, Zhou, Xiong, Wang, Wang (IEEE TKDE 2018, §7.2) train hinge-loss SVMs on examples
``(x, y)`` with ``y ∈ {−1, +1}`` and ``‖x‖₂ ≤ 1`` (their bound ``‖∇f‖ ≤ L`` needs bounded
examples). :class:`OnlineData` holds such a data set, dense (numpy) or sparse (scipy CSR), and
checks those two properties.

Sources
-------
- ``synthetic_ball``: arXiv §6, "generated from a unit ball of dimensionality d = 10 … a total of
  100,000 labeled examples" (:func:`synthetic_ball`).
- ``synthetic_sparse``: a stand-in for the sparse high-dimensional LIBSVM sets real-sim
  (72,309 × 20,958) and RCV1 of TKDE §7.2, which are not available offline
  (:func:`synthetic_sparse`).
- every data set of :mod:`netsim.learning.datasets` with two classes, pre-processed as TKDE
  §7.2 describes (details in ``docs/papers.md``): drop missing values, encode categoricals,
  scale every column to largest absolute value 1, then every example to norm at most 1
  (:func:`from_dataset`).

Choices of ours (the papers give no parameters): the synthetic labels are ``sign(⟨w*, x⟩)`` for a
random unit normal ``w*`` with a share ``label_noise`` of them flipped (default 5 %); the whole
sparse generator (popularity law, term weights, the sparse ``w*``) is ours.

:func:`shard_rows` deals the training rows to the nodes, :func:`stream_rows` gives each node's
mini-batch in a round (a node's stream cycles when it runs out) and :func:`passes` how often the
most-used example is then used. Every random draw uses a local
``numpy.random.default_rng(seed)``, never the global random state. Every mistake ends in a
:class:`~netsim.learning.datasets.DataError` naming the data set, option or argument at fault
and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from netsim.contracts import ComponentConfig
from netsim.fields import resolved_path
from netsim.lazy import lazy_module
from netsim.learning import ordered
from netsim.learning.datasets import (
    MAX_DATA_VALUES,
    MAX_FEATURES,
    DataError,
    Dataset,
    TrainTestSplit,
    dataset_names,
    load_dataset,
)

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    sp = lazy_module("scipy.sparse")

SYNTHETIC: tuple[str, ...] = ("synthetic_ball", "synthetic_sparse")
"""The names of the generated data sets (see :func:`load_online_data`)."""

NORM_TOLERANCE = 1e-9
"""How far above 1 a row's L2 norm may be (rounding) before :class:`OnlineData` refuses it."""

_DEFAULT_TEST_FRACTION = 0.25
# Popularity of the feature of rank r (0 = most popular) in synthetic_sparse:
# P(r) = log((r + OFFSET + 1) / (r + OFFSET)) / log((features + OFFSET) / OFFSET) ≈ 1/(r + 10.5),
# the discretisation of a continuous 1/(r + OFFSET) law, which can be sampled in closed form.
_POPULARITY_OFFSET = 10.0
# synthetic_sparse samples `nonzeros` distinct features per row by rejection when the features
# outnumber them by more than this factor, otherwise with Gumbel top-k (rows × features keys).
_REJECTION_RATIO = 4
_GUMBEL_CHUNK = 1 << 22  # keys per chunk of rows on the Gumbel path


@dataclass(frozen=True, eq=False)
class OnlineData(TrainTestSplit):
    """A binary data set for online learning: y in {-1.0, +1.0}, every row of x with L2 norm <= 1.

    ``x_*`` are float64 arrays of shape (rows, features), C-contiguous numpy arrays for dense
    data or ``scipy.sparse.csr_matrix`` with sorted, unique column indices for sparse data (both
    splits of the same kind); ``y_*`` are float64 labels −1.0 / +1.0. ``source`` says in one
    sentence where the data came from or how it was generated, with the parameters and split.
    The constructor converts the arrays to those types and checks shapes, labels, finiteness and
    that every row (training and test) has L2 norm at most 1 (+ :data:`NORM_TOLERANCE`).
    Instances compare by identity (``eq=False``): the fields are arrays.

    Raises:
        DataError: a shape, label or norm is wrong (naming the data set, split and row).
    """

    name: str
    x_train: np.ndarray | sp.csr_matrix
    y_train: np.ndarray
    x_test: np.ndarray | sp.csr_matrix
    y_test: np.ndarray
    source: str

    def __post_init__(self) -> None:
        kinds = set()
        for part in ("train", "test"):
            x = _as_matrix(self.name, f"x_{part}", getattr(self, f"x_{part}"))
            y = _as_labels(self.name, f"y_{part}", getattr(self, f"y_{part}"))
            if x.shape[0] != len(y):
                raise DataError(
                    f"data set {self.name!r}: x_{part} has {x.shape[0]} rows but y_{part} has "
                    f"{len(y)} labels"
                )
            norms = row_norms(x)
            if len(norms):
                i = int(np.argmax(norms))
                if not norms[i] <= 1.0 + NORM_TOLERANCE:
                    raise DataError(
                        f"data set {self.name!r}: row {i} of x_{part} has L2 norm {norms[i]:.9g} "
                        "> 1; every example must lie in the unit ball (from_dataset scales "
                        "the rows of a loaded data set)"
                    )
            kinds.add(sp.issparse(x))
            object.__setattr__(self, f"x_{part}", x)
            object.__setattr__(self, f"y_{part}", y)
        if len(kinds) > 1:
            raise DataError(
                f"data set {self.name!r}: x_train and x_test must both be dense (numpy) or both "
                "sparse (scipy CSR)"
            )
        self._check_feature_counts()

    @property
    def sparse(self) -> bool:
        """Whether ``x_train`` and ``x_test`` are scipy CSR matrices."""
        return sp.issparse(self.x_train)


def row_norms(x: np.ndarray | sp.csr_matrix) -> np.ndarray:
    """The L2 norm of every row of a dense 2-D array or a CSR matrix (canonical format)."""
    if sp.issparse(x):
        rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
        return np.sqrt(np.bincount(rows, weights=x.data * x.data, minlength=x.shape[0]))
    return ordered.row_norms(x)


# ----------------------------------------------------------------------------------------------
# Generators


def synthetic_ball(
    *,
    examples: int = 100_000,
    features: int = 10,
    label_noise: float = 0.05,
    test_fraction: float = 0.25,
    seed: int = 0,
) -> OnlineData:
    """Li et al. §6 synthetic data: points uniform in the d-dimensional unit ball.

    Every point is a Gaussian direction times a radius ``U^(1/d)`` (``U`` uniform on [0, 1)),
    so ``P(‖x‖ ≤ r) = r^d``. Its label is ``sign(⟨w*, x⟩)`` (0 → +1) for one random unit
    hyperplane normal ``w*`` (uniform on the sphere), flipped with probability ``label_noise``.
    Rows are i.i.d., so the test split is simply the last ``round(test_fraction · examples)``
    rows. The arXiv paper's experiment is the default: d = 10, 100,000 examples.

    Raises:
        DataError: a parameter outside its range (examples ≥ 2, features in [1, 10⁷], label_noise in
            [0, 0.5), test_fraction in (0, 1) leaving both splits non-empty, seed ≥ 0).
    """
    where = "synthetic_ball"
    n = integer_option(where, "examples", examples, 2)
    d = integer_option(where, "features", features, 1, MAX_FEATURES)
    check_generated_size(where, n, d, "features")
    noise = _label_noise(where, label_noise)
    n_test = _test_rows(where, test_fraction, n)
    seed = integer_option(where, "seed", seed, 0)
    made = _ball(n, d, noise, seed)
    source = (
        f"Synthetic data as in Li et al. (arXiv 2017, §6): {n:,} points uniform in the "
        f"{d}-dimensional unit ball (numpy default_rng seed {seed}), labels sign(<w*, x>) for a "
        f"random unit normal w* with each label flipped with probability {noise:g}; the last "
        f"{n_test:,} rows (test_fraction {float(test_fraction):g}) are the test split."
    )
    return _split(where, made.x, made.y, n_test, source)


def synthetic_sparse(
    *,
    examples: int = 20_000,
    features: int = 20_958,
    nonzeros: int = 50,
    relevant: int = 500,
    label_noise: float = 0.05,
    test_fraction: float = 0.25,
    seed: int = 0,
) -> OnlineData:
    """Sparse high-dimensional text-like data standing in for real-sim / RCV1.

    The LIBSVM sets real-sim (72,309 × 20,958, about 51 nonzeros per row) and RCV1 of Li et al.
    (TKDE 2018, §7.2) are not available offline; this generator imitates their shape:

    - a random permutation ranks the features by popularity; the feature of rank ``r`` has
      probability ``log((r + 11)/(r + 10)) / log((features + 10)/10)`` ≈ ``1/(r + 10.5)``
      (Zipf-like, ∝ 1/(rank + 10), sampled in closed form);
    - every row holds ``nonzeros`` *distinct* features, drawn one after the other with those
      probabilities, without replacement;
    - values are tf-idf-like: ``(1 + E) · idf`` with ``E ~ Exp(1)`` (a term weight of at least
      1, like a count) and ``idf = 1 + ln((1 + examples)/(1 + document frequency))`` (the
      smoothed idf of scikit-learn, from the generated rows); every row is scaled to unit L2
      norm;
    - the true normal ``w*`` has N(0, 1) weights on ``relevant`` features drawn by popularity
      without replacement (uniformly chosen ones would miss most rows: with the defaults a row
      would touch about one of them, and a row touching none has score 0, a tie);
    - labels are ``sign(⟨w*, x⟩ − median)`` (ties → +1), so the classes are balanced up to the
      rows tied at the median, each flipped with probability ``label_noise``.

    Rows are i.i.d., so the test split is the last ``round(test_fraction · examples)`` rows.
    Fully vectorised: 72,309 × 20,958 with 50 nonzeros per row takes well under a second.

    Returns:
        OnlineData with CSR ``x_train`` and ``x_test``.

    Raises:
        DataError: a parameter outside its range (examples ≥ 2, features in [1, 10⁷], nonzeros in
            [1, features], relevant in [1, features], label_noise in [0, 0.5), test_fraction in
            (0, 1) leaving both splits non-empty, seed ≥ 0).
    """
    where = "synthetic_sparse"
    n = integer_option(where, "examples", examples, 2)
    d = integer_option(where, "features", features, 1, MAX_FEATURES)
    k = integer_option(where, "nonzeros", nonzeros, 1, d, "features")
    check_generated_size(where, n, k, "nonzeros")
    m = integer_option(where, "relevant", relevant, 1, d, "features")
    noise = _label_noise(where, label_noise)
    n_test = _test_rows(where, test_fraction, n)
    seed = integer_option(where, "seed", seed, 0)
    made = _sparse(n, d, k, m, noise, seed)
    source = (
        f"Synthetic sparse text-like data (our stand-in for real-sim / RCV1 of Li et al., TKDE "
        f"2018, §7.2, which are not available offline; numpy default_rng seed {seed}): {n:,} "
        f"rows × {d:,} features with {k} distinct nonzero features per row drawn with "
        f"popularity ∝ 1/(rank + 10), values (1 + Exp(1)) × smoothed idf, rows scaled to unit "
        f"L2 norm, labels sign(<w*, x> − median) for w* with N(0, 1) weights on {m} features "
        f"drawn by popularity, each label flipped with probability {noise:g}; the last "
        f"{n_test:,} rows (test_fraction {float(test_fraction):g}) are the test split."
    )
    return _split(where, made.x, made.y, n_test, source)


def from_dataset(data: Dataset) -> OnlineData:
    """Li et al. (TKDE 2018, §7.2) pre-processing (``docs/papers.md``) of a loaded binary Dataset.

    1. Class index 0 → −1, class index 1 → +1.
    2. Every column is divided by its largest absolute value in the training split and the
       same divisor is applied to the test split (whose values may then exceed 1 in absolute
       value). A column that is zero throughout the training split is set to 0 in both
       splits (nothing can be learnt from it).
    3. Every row (training or test) with L2 norm > 1 is scaled to norm 1; shorter rows are
       kept as they are.

    Missing values and categorical columns are the loaders' business: every loader refuses
    missing cells, and Adult is read from the complete rows with its categorical columns
    one-hot encoded (:func:`~netsim.learning.datasets.load_dataset`). The result is dense;
    its ``source`` is the data set's source and split followed by these steps.

    Raises:
        DataError: the data set does not have exactly two classes.
    """
    if data.classes != 2:
        names = ", ".join(repr(c) for c in data.class_names)
        raise DataError(
            f"data set {data.name!r} has {data.classes} classes ({names}); online learning "
            "with labels ±1 needs a binary data set (2 classes)"
        )
    y_train = np.where(data.y_train == 1, 1.0, -1.0)
    y_test = np.where(data.y_test == 1, 1.0, -1.0)
    if data.n_train:
        scale = np.abs(data.x_train).max(axis=0)
    else:
        scale = np.zeros(data.features)
    used = scale > 0

    def columns(x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x)
        np.divide(x, scale, out=out, where=used)
        return out

    x_train, clipped_train = _clip_rows(columns(data.x_train))
    x_test, clipped_test = _clip_rows(columns(data.x_test))
    zero = int((~used).sum())
    source = (
        f"{data.source}; {data.split.rstrip('.')}; pre-processed as Li et al. (TKDE 2018, "
        f"§7.2): class {data.class_names[0]!r} → −1 and {data.class_names[1]!r} → +1, every "
        f"column divided by its largest absolute training value ({zero} all-zero training "
        f"columns set to 0), then {clipped_train:,} training and {clipped_test:,} test rows "
        "with L2 norm > 1 scaled to norm 1."
    )
    return OnlineData(
        name=data.name,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        source=source,
    )


def hold_out(data: OnlineData, fraction: float, seed: int) -> OnlineData:
    """The training split of ``data`` cut in two: a random ``fraction`` of its rows (drawn with
    ``seed``) becomes the evaluation set, the rest the training set; the test split is left
    out entirely. For choosing hyper-parameters (DOLA's R and λ) without the test set."""
    if not 0.0 < fraction < 1.0:
        raise DataError(f"the validation fraction must be in (0, 1), got {fraction}")
    rows = data.n_train
    held = round(fraction * rows)
    if not 0 < held < rows:
        raise DataError(
            f"data set {data.name!r}: a validation fraction {fraction:g} of {rows} training rows "
            "leaves no row on one side"
        )
    order = np.random.default_rng(seed).permutation(rows)
    evaluation, training = np.sort(order[:held]), np.sort(order[held:])
    return OnlineData(
        name=data.name,
        x_train=data.x_train[training],
        y_train=data.y_train[training],
        x_test=data.x_train[evaluation],
        y_test=data.y_train[evaluation],
        source=(
            f"{data.source} Validation: {held:,} of the {rows:,} training rows (fraction "
            f"{fraction:g}, seed {seed}) evaluate, the other {rows - held:,} train; the test "
            "split is not used."
        ),
    )


def load_online_data(
    name: str,
    *,
    path: Path | str | None = None,
    label: str | int | None = None,
    split_seed: int = 0,
    test_fraction: float | None = None,
    options: Mapping[str, float | int] | None = None,
) -> OnlineData:
    """Load or generate the binary data set ``name`` for online learning.

    ``name`` is one of :data:`SYNTHETIC`, of :data:`~netsim.learning.datasets.BUILTIN` or of
    :data:`~netsim.learning.datasets.USER_FORMATS`.

    - Synthetic: ``options`` are the generator's keyword arguments (``examples``,
      ``features``, ``label_noise``, and for ``synthetic_sparse`` also ``nonzeros`` and
      ``relevant``); ``split_seed`` is its seed and ``test_fraction`` defaults to 0.25.
      ``path`` and ``label`` are refused.
    - Otherwise: :func:`~netsim.learning.datasets.load_dataset` with ``path``, ``label``,
      ``split_seed`` and ``test_fraction``, then :func:`from_dataset`; ``options`` must be
      empty.

    Raises:
        DataError: an unknown name or option, an argument that does not apply, a parameter
            outside its range (the message names it and the allowed range), or any error of
            the loader or of :func:`from_dataset`.
    """
    options = dict(options or {})
    known = SYNTHETIC + dataset_names()
    if not isinstance(name, str) or (name not in known and ":" not in name):
        raise DataError(
            f"unknown data set {name!r}; the online data sets are {_listing(known)} (the "
            f"generated {_listing(SYNTHETIC)}, the built-in data sets with two classes, and "
            "users' own files)"
        )
    if name not in SYNTHETIC:
        if options:
            raise DataError(
                f"data set {name!r} takes no options (got {_listing(sorted(options))}); options "
                f"are the parameters of the generated data sets {_listing(SYNTHETIC)}"
            )
        return from_dataset(
            load_dataset(
                name, path=path, label=label, split_seed=split_seed, test_fraction=test_fraction
            )
        )
    for argument, value in (("path", path), ("label", label)):
        if value is not None:
            raise DataError(
                f"data set {name!r} is generated; do not give {argument}= (got {value!r})"
            )
    allowed = ("examples", "features", "label_noise")
    if name == "synthetic_sparse":
        allowed = ("examples", "features", "nonzeros", "relevant", "label_noise")
    for key in options:
        if key not in allowed:
            hint = ""
            if key in ("seed", "test_fraction"):
                argument = "split_seed" if key == "seed" else "test_fraction"
                hint = f" (give the {key} as {argument}=, not as an option)"
            raise DataError(
                f"data set {name!r}: unknown option {key!r}{hint}; the options are "
                f"{_listing(allowed)}"
            )
    integer_option(name, "split_seed", split_seed, 0)
    fraction = _DEFAULT_TEST_FRACTION if test_fraction is None else test_fraction
    generator = synthetic_ball if name == "synthetic_ball" else synthetic_sparse
    return generator(**options, test_fraction=fraction, seed=split_seed)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Streams: which node uses which training rows


def shard_rows(n_train: int, nodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split the training stream across ``nodes`` nodes.

    A seeded permutation (``numpy.random.default_rng(seed)``) of the ``n_train`` rows is dealt
    round-robin: node ``i`` gets permuted positions ``i, i + nodes, i + 2·nodes, …``, so the
    shards are disjoint, cover every row and differ in length by at most 1.

    Returns:
        ``(table, lengths)``: ``table`` is int64 of shape (nodes, max length) with node ``i``'s
        rows in its first ``lengths[i]`` entries and −1 after them; ``lengths`` is int64 of
        shape (nodes,).

    Raises:
        DataError: ``n_train`` or ``nodes`` below 1, a negative seed, or more nodes than
            training rows (every node needs at least one example).
    """
    where = "shard_rows"
    n = integer_option(where, "n_train", n_train, 1)
    m = integer_option(where, "nodes", nodes, 1)
    seed = integer_option(where, "seed", seed, 0)
    if m > n:
        raise DataError(
            f"{m:,} nodes but only {n:,} training rows; every node needs at least one example "
            "(use fewer nodes or more data)"
        )
    longest = -(-n // m)
    dealt = np.full(longest * m, -1, dtype=np.int64)
    dealt[:n] = np.random.default_rng(seed).permutation(n)
    table = np.ascontiguousarray(dealt.reshape(longest, m).T)
    lengths = (n - np.arange(m, dtype=np.int64) + m - 1) // m
    return table, lengths


def stream_rows(
    table: np.ndarray,
    lengths: np.ndarray,
    round_index: int | np.ndarray,
    batch: int,
    nodes: np.ndarray,
) -> np.ndarray:
    """The training rows that ``nodes`` use in round ``round_index`` with mini-batch ``batch``.

    Node ``i`` (a node id of ``nodes``) uses the rows at positions
    ``(round_index · batch + k) mod lengths[i]``, ``k = 0 … batch − 1``, of its shard (a row of
    ``table`` from :func:`shard_rows`): its stream cycles when it runs out. Rounds are 0-based;
    ``round_index`` may be one number for all nodes or one per node (under churn a node counts
    only the rounds it took part in).

    Returns:
        int64 array of shape (len(nodes), batch) of training-row indices.

    Raises:
        DataError: a negative round, a batch below 1, a node id outside the table, or a
            table and lengths that do not fit together.
    """
    where = "stream_rows"
    if np.ndim(round_index) == 0:
        start: int | np.ndarray = integer_option(where, "round_index", round_index, 0)
    else:
        start = np.asarray(round_index, dtype=np.int64)
        if start.shape != np.shape(nodes) or (start.size and start.min() < 0):
            raise DataError(
                "stream_rows: round_index must be one round >= 0 or one per node, got "
                f"shape {start.shape} for {np.size(nodes)} nodes"
            )
        start = start[:, None]
    size = integer_option(where, "batch", batch, 1)
    table = np.asarray(table)
    lengths = np.asarray(lengths)
    ids = np.asarray(nodes)
    if table.ndim != 2 or lengths.shape != (table.shape[0],):
        raise DataError(
            f"stream_rows: table must have shape (nodes, max length) and lengths (nodes,), got "
            f"{table.shape} and {lengths.shape} (use shard_rows)"
        )
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise DataError(f"stream_rows: nodes must be a 1-D array of node ids, got {ids!r}")
    if ids.size and (ids.min() < 0 or ids.max() >= len(lengths)):
        raise DataError(
            f"stream_rows: node ids must lie in [0, {len(lengths) - 1}], got "
            f"{int(ids.min())}..{int(ids.max())}"
        )
    ids = ids.astype(np.int64, copy=False)
    own = lengths[ids].astype(np.int64)
    if own.size and (own.min() < 1 or own.max() > table.shape[1]):
        raise DataError(
            f"stream_rows: shard lengths must lie in [1, {table.shape[1]}] (the table width), "
            f"got {int(own.min())}..{int(own.max())}"
        )
    offsets = start * size + np.arange(size, dtype=np.int64)[None, :]
    positions = offsets % own[:, None]
    return table[ids[:, None], positions].astype(np.int64, copy=False)


def passes(lengths: np.ndarray, rounds: int, batch: int) -> int:
    """How many times the most-used training example is used.

    Every node takes ``batch`` examples in each of ``rounds`` rounds from its shard of
    ``lengths[i]`` rows, cycling when it runs out (:func:`stream_rows`), so the first row of
    node ``i`` is used ``ceil(rounds · batch / lengths[i])`` times; the result is the maximum
    over the nodes (0 for 0 rounds).

    Raises:
        DataError: empty lengths, a length below 1, negative rounds or a batch below 1.
    """
    where = "passes"
    total = integer_option(where, "rounds", rounds, 0) * integer_option(where, "batch", batch, 1)
    own = np.asarray(lengths)
    if own.ndim != 1 or own.size == 0 or own.dtype.kind not in "iu" or own.min() < 1:
        raise DataError(
            f"passes: lengths must be a non-empty 1-D integer array of shard lengths >= 1, got "
            f"{own!r}"
        )
    return int((-(-total // own.astype(np.int64))).max())


# ----------------------------------------------------------------------------------------------
# Generator internals


class _Generated(NamedTuple):
    """All rows of a generated data set with the truth behind the labels (for tests)."""

    x: np.ndarray | sp.csr_matrix
    y: np.ndarray  # float64 ±1, after the flips
    normal: np.ndarray  # the true normal w*
    threshold: float  # clean label = +1 where <w*, x> >= threshold
    flipped: np.ndarray  # bool: which labels were flipped


def unit_ball_points(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points uniform in the unit ball of R^d: a Gaussian direction times ``U^(1/d)``."""
    directions = rng.standard_normal((n, d))
    lengths = np.linalg.norm(directions, axis=1)
    radii = rng.random(n) ** (1.0 / d)
    scale = np.zeros(n)
    np.divide(radii, lengths, out=scale, where=lengths > 0)
    return directions * scale[:, None]


def _ball(n: int, d: int, noise: float, seed: int) -> _Generated:
    """``n`` points uniform in the d-ball, labelled by a random hyperplane (no validation)."""
    rng = np.random.default_rng(seed)
    normal = _unit(rng.standard_normal(d))
    x = unit_ball_points(n, d, rng)
    clean = np.where(ordered.matvec_new(x, normal) >= 0.0, 1.0, -1.0)
    flipped = rng.random(n) < noise
    return _Generated(x, np.where(flipped, -clean, clean), normal, 0.0, flipped)


def _sparse(n: int, d: int, k: int, m: int, noise: float, seed: int) -> _Generated:
    """The rows of :func:`synthetic_sparse` (no validation)."""
    rng = np.random.default_rng(seed)
    by_rank = rng.permutation(d)  # by_rank[r] is the feature of popularity rank r
    log_prob = np.empty(d)
    log_prob[by_rank] = np.log(np.log1p(1.0 / (np.arange(d) + _POPULARITY_OFFSET)))
    support = np.sort(_gumbel_top(rng, log_prob[None, :], m)[0])
    normal = np.zeros(d)
    normal[support] = rng.standard_normal(m)
    columns = _distinct_features(rng, n, d, k, by_rank, log_prob)
    frequency = np.bincount(columns.ravel(), minlength=d)
    idf = 1.0 + np.log((1.0 + n) / (1.0 + frequency))
    values = (1.0 + rng.standard_exponential((n, k))) * idf[columns]
    values /= ordered.row_norms(values)[:, None]
    index_type = np.int32 if d <= np.iinfo(np.int32).max else np.int64
    x = sp.csr_matrix(
        (values.ravel(), columns.ravel().astype(index_type), np.arange(0, n * k + 1, k)),
        shape=(n, d),
    )
    x.has_sorted_indices = True
    scores = x @ normal
    threshold = float(np.median(scores))
    clean = np.where(scores >= threshold, 1.0, -1.0)
    flipped = rng.random(n) < noise
    return _Generated(x, np.where(flipped, -clean, clean), normal, threshold, flipped)


def _distinct_features(
    rng: np.random.Generator, n: int, d: int, k: int, by_rank: np.ndarray, log_prob: np.ndarray
) -> np.ndarray:
    """``k`` distinct features per row, sampled successively without replacement; sorted rows.

    With many more features than ``k``: draw ``k`` features per row with replacement, then
    replace every repeat by a fresh draw until no row has one. The kept features are the first
    ``k`` distinct values of an i.i.d. stream, i.e. successive sampling without replacement.
    Otherwise Gumbel top-k (the same distribution) over ``rows × features`` keys, in chunks.
    """
    if d <= _REJECTION_RATIO * k:
        chunk = max(1, _GUMBEL_CHUNK // d)
        blocks = [
            _gumbel_top(rng, np.broadcast_to(log_prob, (min(chunk, n - lo), d)), k)
            for lo in range(0, n, chunk)
        ]
        return np.sort(np.vstack(blocks), axis=1)
    span = math.log((d + _POPULARITY_OFFSET) / _POPULARITY_OFFSET)

    def draw(size: int | tuple[int, int]) -> np.ndarray:
        u = rng.random(size)
        rank = np.floor(_POPULARITY_OFFSET * np.expm1(u * span)).astype(np.int64)
        return by_rank[np.minimum(rank, d - 1)]

    chosen = np.sort(draw((n, k)), axis=1)
    pending = np.arange(n)
    block = chosen
    while True:
        repeat = np.zeros(block.shape, dtype=bool)
        repeat[:, 1:] = block[:, 1:] == block[:, :-1]
        rows = repeat.any(axis=1)
        if not rows.any():
            return chosen
        pending, block, repeat = pending[rows], block[rows], repeat[rows]
        block[repeat] = draw(int(repeat.sum()))
        block.sort(axis=1)
        chosen[pending] = block


def _gumbel_top(rng: np.random.Generator, log_prob: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``log_prob``, ``k`` distinct columns drawn successively without replacement."""
    keys = log_prob + rng.gumbel(size=log_prob.shape)
    if k == keys.shape[1]:
        return np.broadcast_to(np.arange(k), keys.shape).copy()
    return np.argpartition(-keys, k - 1, axis=1)[:, :k]


def _unit(v: np.ndarray) -> np.ndarray:
    length = ordered.norm(v)
    if length == 0.0:  # pragma: no cover - probability zero
        v = np.zeros_like(v)
        v[0], length = 1.0, 1.0
    return v / length


def _split(
    name: str, x: np.ndarray | sp.csr_matrix, y: np.ndarray, n_test: int, source: str
) -> OnlineData:
    cut = len(y) - n_test
    return OnlineData(
        name=name, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:], source=source
    )


def _clip_rows(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Rows with L2 norm > 1 scaled to norm 1; also the number of rows scaled."""
    norms = row_norms(x)
    long = norms > 1.0
    x[long] /= norms[long, None]
    return x, int(long.sum())


# ----------------------------------------------------------------------------------------------
# Argument checks


def _as_matrix(name: str, part: str, x: object) -> np.ndarray | sp.csr_matrix:
    try:
        if sp.issparse(x):
            out = sp.csr_matrix(x, dtype=np.float64)
            if not out.has_canonical_format:
                out = out.copy()
                out.sum_duplicates()
            finite = bool(np.isfinite(out.data).all())
        else:
            out = np.ascontiguousarray(x, dtype=np.float64)
            finite = bool(np.isfinite(out).all())
    except (TypeError, ValueError) as exc:
        raise DataError(f"data set {name!r}: {part} is not a numeric matrix: {exc}") from None
    if out.ndim != 2:
        raise DataError(
            f"data set {name!r}: {part} must have shape (rows, features), got {out.shape}"
        )
    if not finite:
        raise DataError(f"data set {name!r}: {part} holds NaN or infinite values")
    return out


def _as_labels(name: str, part: str, y: object) -> np.ndarray:
    try:
        out = np.ascontiguousarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"data set {name!r}: {part} is not a numeric vector: {exc}") from None
    if out.ndim != 1:
        raise DataError(f"data set {name!r}: {part} must have shape (rows,), got {out.shape}")
    bad = (out != 1.0) & (out != -1.0)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(
            f"data set {name!r}: {part}[{i}] is {float(out[i])!r}; labels must be -1.0 or +1.0"
        )
    return out


#: Most values a generated data set may hold (8 GB of float64), as a data set read from a file.
MAX_GENERATED_VALUES = MAX_DATA_VALUES


def check_generated_size(where: str, examples: int, per_row: int, what: str) -> None:
    """Refuse a generated data set too large to build, before allocating it."""
    if examples * per_row > MAX_GENERATED_VALUES:
        raise DataError(
            f"{where}: examples × {what} = {examples:,} × {per_row:,} values; at most "
            f"{MAX_GENERATED_VALUES:,} (8 GB): generate fewer examples"
        )


def integer_option(
    where: str, key: str, value: object, low: int, high: int | None = None, bound: str = ""
) -> int:
    """``value`` as an int in [low, high]; integral floats (``1e5``) are accepted."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    else:
        number = None
    if number is None or number < low or (high is not None and number > high):
        allowed = f"an integer >= {low}"
        if high is not None:
            allowed = f"an integer in [{low}, {high}]"
            if bound:
                allowed = f"an integer in [{low}, {bound}] = [{low}, {high}]"
        raise DataError(f"{where}: {key} must be {allowed}, got {value!r}")
    return number


def _label_noise(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) < 0.5:
        raise DataError(
            f"{where}: label_noise must be a number in [0, 0.5) (the probability that a label "
            f"is flipped), got {value!r}"
        )
    return float(value)


def _test_rows(where: str, fraction: object, n: int) -> int:
    """The number of test rows, ``round(fraction · n)``; both splits must be non-empty."""
    if isinstance(fraction, bool) or not isinstance(fraction, Real) or not 0 < fraction < 1:
        raise DataError(
            f"{where}: test_fraction must be a number in (0, 1) (the share of rows held out "
            f"for testing), got {fraction!r}"
        )
    n_test = math.floor(float(fraction) * n + 0.5)
    if n_test < 1 or n_test > n - 1:
        raise DataError(
            f"{where}: test_fraction {float(fraction):g} of {n:,} examples leaves "
            f"{n - n_test:,} training and {n_test:,} test rows; each side needs at least 1 row "
            f"(test_fraction in [{0.5 / n:.3g}, {1 - 0.5 / n:.3g}) for {n:,} examples)"
        )
    return n_test


def _listing(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(repr(n) for n in names)


class StreamDataConfig(ComponentConfig):
    """What the online learners' ``data`` sections share: a file, its label column, the
    train/test split seed and the generator's or reader's options (:func:`load_online_data`)."""

    path: Path | None = None
    label: str | int | None = None
    split_seed: int = Field(default=0, ge=0)
    options: dict[str, float] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else resolved_path(value, info)

"""Prediction from a LightGBM text model without lightgbm: numpy over the saved trees.

The shipped ranker is trained with LightGBM, whose Python package pulls in scipy (about 40 MB
of wheels). A GPU image without them still ranks with the ranker instead of falling back to
an older model: training keeps needing lightgbm, prediction does not. Only what the ranker
uses is read: numerical splits (a categorical split raises ModelError), the three missing-value
rules, and a tree's leaves; the result matches ``lightgbm.Booster.predict`` (raw score) to
rounding, which tests/test_ranker.py checks against lightgbm itself.

    >>> text = '''tree
    ... version=v4
    ... num_class=1
    ... max_feature_idx=1
    ...
    ... Tree=0
    ... num_leaves=2
    ... split_feature=1
    ... threshold=0.5
    ... decision_type=2
    ... left_child=-1
    ... right_child=-2
    ... leaf_value=1 3
    ... shrinkage=1
    ...
    ... end of trees
    ... '''
    >>> TextBooster(text).predict(np.array([[9.0, 0.0], [9.0, 1.0]])).tolist()
    [1.0, 3.0]
"""

from __future__ import annotations

import numpy as np

from .errors import ModelError

_ZERO = 1e-35  # LightGBM's kZeroThreshold: |x| below it counts as zero for missing_type Zero


def _goes_left(x, threshold, missing, default_left, plain: bool):
    """Which of the values ``x`` at nodes with these split fields go to the left child (LightGBM's
    rules; ``plain``: no node has a missing-value rule and NaNs were replaced by 0)."""
    if plain:
        return x <= threshold
    nan = np.isnan(x)
    x = np.where(nan & (missing != 2), 0.0, x)
    to_default = ((missing == 1) & (np.abs(x) <= _ZERO)) | ((missing == 2) & nan)
    return np.where(to_default, default_left, x <= threshold)


def _fold_constant(X, flat_trees, plain: bool):
    """(left, right, roots) of the flattened trees with every node that splits on a feature
    constant over X's rows replaced by the child all rows take: the same leaves, fewer levels.

    A tune ranks one problem's candidates at a time, and about half of the features describe the
    problem (its sizes, dtype, layouts), the same in every row: on the shipped H100 ranker 21-24
    of 49 features and 2,100-2,500 of its 9,000 nodes, so each (row, tree) pair took 4.4-4.7
    levels instead of 5.2-5.3 (4 problems, 3,700-7,600 candidates each).
    A NaN column never counts as constant (NaN != NaN): its nodes stay, and are walked as before."""
    feature, threshold, default_left, missing, left, right, _, roots = flat_trees
    if X.shape[0] == 0 or len(feature) == 0:
        return left, right, roots
    const = (X == X[0]).all(axis=0)
    on = const[feature]
    if not on.any():
        return left, right, roots
    go_left = _goes_left(X[0][feature], threshold, missing, default_left, plain)
    target = np.where(go_left, left, right)

    def resolve(ptr):
        ptr = ptr.copy()
        while True:
            at = np.flatnonzero(ptr >= 0)
            at = at[on[ptr[at]]]
            if not at.size:
                return ptr
            ptr[at] = target[ptr[at]]
    return resolve(left), resolve(right), resolve(roots)


def _count(fields: dict[str, str], name: str, where: str, default: str | None = None) -> int:
    """The integer field ``name``, ``default`` when absent (ModelError, naming ``where``, when it is
    absent without a default or not an integer)."""
    try:
        return int(fields[name] if default is None else fields.get(name, default))
    except KeyError:
        raise ModelError(f"{where}: no {name} line") from None
    except ValueError:
        raise ModelError(f"{where}: {name}={fields[name]!r} is not an integer") from None


def _array(fields: dict[str, str], name: str, dtype, n: int, where: str) -> np.ndarray:
    """The field ``name`` of a tree as ``n`` values of ``dtype``, one per leaf or one per split;
    ModelError when absent, unparsable or of another length (the flattened trees index each
    array by the node and leaf counts, so a value too few shifted every later tree's)."""
    if name not in fields:
        raise ModelError(f"{where}: no {name} line")
    try:
        values = np.array(fields[name].split(), dtype=dtype)
    except (ValueError, OverflowError):
        raise ModelError(f"{where}: {name} is not a list of {np.dtype(dtype).name} values") from None
    if len(values) != n:
        raise ModelError(f"{where}: {name} has {len(values)} values, not {n} (num_leaves={fields['num_leaves']})")
    return values


def _check_children(left: np.ndarray, right: np.ndarray, n: int, where: str) -> None:
    """Every node but the root (0) and every leaf (~0..~(n-1)) is the child of exactly one node:
    each walk from the root then reaches a leaf of this tree. (A node that was its own child made
    prediction loop forever, in numpy and in lightgbm; a child beyond the leaves read another
    tree's leaf.) Why that suffices: a walk that came back to a node would have come back to its
    one parent first, and so on back to the root, which is nobody's child."""
    kids = np.sort(np.concatenate([left, right]))
    if np.array_equal(kids, np.r_[-n:0, 1:n - 1]):  # the leaves ~(n-1)..~0, the nodes but the root
        return
    if kids[0] < -n or kids[-1] > n - 2:
        raise ModelError(f"{where}: its child indices run {kids[0]}..{kids[-1]}, outside "
                         f"{-n}..{n - 2} for {n} leaves")
    raise ModelError(f"{where}: its child indices do not make a tree (a node or leaf is the child of "
                     "no node or of two, or the root is a child)")


class _Tree:
    __slots__ = ("feature", "threshold", "default_left", "missing", "left", "right", "leaf")

    def __init__(self, fields: dict[str, str], where: str, num_feature: int):
        """The tree of one 'Tree=' block's ``fields``, checked to be one the predictor can walk:
        array lengths that fit its num_leaves, features below ``num_feature``, children that
        make a tree, finite leaves (a NaN leaf scored every row that reached it NaN)."""
        n = _count(fields, "num_leaves", where)
        if n < 1:
            raise ModelError(f"{where}: num_leaves={n}")
        self.leaf = _array(fields, "leaf_value", np.float64, n, where)
        if not np.isfinite(self.leaf).all():
            raise ModelError(f"{where}: leaf_value has a value that is not finite")
        if fields.get("is_linear", "0") != "0":
            # A linear tree's leaves are linear models (leaf_coeff), which this reader does not
            # apply: its scores would be wrong, silently. gemmtune's rankers never train them.
            raise ModelError(f"{where}: a linear tree, which the numpy predictor does not read")
        if n == 1:
            self.feature = np.zeros(0, np.int64)
            return
        if _count(fields, "num_cat", where, default="0"):  # absent in hand-written trees (tests, doctest)
            raise ModelError(f"{where}: categorical splits, which the numpy predictor does not read "
                             "(gemmtune's rankers never have them)")
        self.feature = _array(fields, "split_feature", np.int64, n - 1, where)
        bad = self.feature[(self.feature < 0) | (self.feature >= num_feature)]
        if bad.size:
            raise ModelError(f"{where} splits on feature {bad[0]}, beyond the model's {num_feature} "
                             f"features (0..{num_feature - 1})")
        self.threshold = _array(fields, "threshold", np.float64, n - 1, where)
        dt = _array(fields, "decision_type", np.int64, n - 1, where)
        if np.any(dt & 1):
            raise ModelError(f"{where}: categorical splits, which the numpy predictor does not read "
                             "(gemmtune's rankers never have them)")
        self.default_left = (dt & 2) != 0
        self.missing = (dt >> 2) & 3  # 0 none, 1 zero, 2 NaN
        self.left = _array(fields, "left_child", np.int64, n - 1, where)
        self.right = _array(fields, "right_child", np.int64, n - 1, where)
        _check_children(self.left, self.right, n, where)


def _fields(lines) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _check_tree_sizes(header: dict[str, str], blocks: list[str]) -> None:
    """The header's tree_sizes must be the trees' byte counts. Why: lightgbm finds tree i at byte
    sum(tree_sizes[:i]) and parses the trees in parallel, and a tree not found there is a
    Log::Fatal inside an OpenMP loop, which aborted the whole process (SIGABRT); this reader
    splits on the 'Tree=' lines, so without the check the two would read different trees.
    Without tree_sizes lightgbm reads the trees one after the other, as this reader does."""
    if "tree_sizes" not in header:
        return
    sizes = header["tree_sizes"].split()
    if len(sizes) != len(blocks):
        raise ModelError(f"its header's tree_sizes lists {len(sizes)} trees, the file has {len(blocks)}")
    for i, (size, block) in enumerate(zip(sizes, blocks)):
        # a tree's bytes: 'Tree=' and its block up to the next 'Tree=' line (or 'end of trees')
        got = len("Tree=") + len(block.encode()) + 1
        if size != str(got):
            raise ModelError(f"tree {i} is {got} bytes, its header's tree_sizes says {size}: the offsets "
                             "lightgbm reads the trees at are stale")


class TextBooster:
    """A LightGBM booster read from its text format (``Booster.model_to_string()``), for
    prediction: ``predict(X)`` is the raw score, the sum of every tree's leaf.

    Reading it checks it too, so that an edited file is a ModelError here, naming the tree and
    the problem, rather than an IndexError, a wrong score or a prediction that never ends (the
    same text handed to lightgbm could abort the process or read past its arrays): a header
    whose feature names / infos or tree_sizes do not match it, a file cut short, trees out of
    order, and each tree's checks (``_Tree``)."""

    def __init__(self, text: str):
        head, _, body = text.partition("\nTree=")
        if not body or not head.startswith("tree"):
            raise ModelError("not a LightGBM text model (no 'tree' header or no trees)")
        header = _fields(head.splitlines())
        if (_count(header, "num_class", "its header", default="1") != 1
                or _count(header, "num_tree_per_iteration", "its header", default="1") != 1):
            raise ModelError("the numpy predictor reads single-output LightGBM models only")
        self.num_feature = _count(header, "max_feature_idx", "its header") + 1
        if self.num_feature < 1:
            raise ModelError(f"its header's max_feature_idx={self.num_feature - 1}")
        for key in ("feature_names", "feature_infos"):
            if key in header and len(header[key].split()) != self.num_feature:
                raise ModelError(f"its header lists {len(header[key].split())} {key}, its max_feature_idx "
                                 f"makes {self.num_feature} features")
        trees, ended, _ = body.partition("\nend of trees")
        if not ended:
            raise ModelError("no 'end of trees' line: the file is cut short")
        blocks = trees.split("\nTree=")
        _check_tree_sizes(header, blocks)
        self.trees = []
        for i, block in enumerate(blocks):
            first, _, rest = block.partition("\n")
            if first != str(i):
                raise ModelError(f"its tree {i} is headed 'Tree={first}': trees missing or out of order")
            self.trees.append(_Tree(_fields(rest.splitlines()), f"tree {i}", self.num_feature))

    def num_trees(self) -> int:
        return len(self.trees)

    def _flatten(self) -> None:
        # Every tree's nodes in one array (children and leaves re-based), so that prediction
        # walks all (row, tree) pairs together: ~4x faster than tree by tree in numpy.
        feats, thr, dleft, miss, left, right, leaves, roots = [], [], [], [], [], [], [], []
        n_nodes = n_leaves = 0
        for t in self.trees:
            if len(t.feature) == 0:  # a single leaf: a root that is a leaf
                roots.append(~n_leaves)
                leaves.append(t.leaf)  # its one value (_Tree checks the count)
                n_leaves += 1
                continue
            roots.append(n_nodes)
            feats.append(t.feature)
            thr.append(t.threshold)
            dleft.append(t.default_left)
            miss.append(t.missing)
            for src, dst in ((t.left, left), (t.right, right)):
                dst.append(np.where(src >= 0, src + n_nodes, ~(~src + n_leaves)))
            leaves.append(t.leaf)
            n_nodes += len(t.feature)
            n_leaves += len(t.leaf)

        def cat(xs, dtype):
            return np.concatenate(xs).astype(dtype) if xs else np.zeros(0, dtype)
        self._flat = (cat(feats, np.int64), cat(thr, np.float64), cat(dleft, bool), cat(miss, np.int64),
                      cat(left, np.int64), cat(right, np.int64), cat(leaves, np.float64),
                      np.array(roots, dtype=np.int64))

    def predict(self, X, num_threads: int | None = None) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.num_feature:
            raise ModelError(f"the model takes {self.num_feature} features per row, got shape {X.shape}")
        if not hasattr(self, "_flat"):
            self._flatten()
        feature, threshold, default_left, missing, left, right, leaf, roots = self._flat
        n = X.shape[0]
        plain = not missing.any()
        if plain:
            # Every split has missing type None (the shipped rankers' 9,000 nodes): a NaN counts
            # as 0 everywhere, so it is replaced once and each level is one compare: 0.27 -> 0.18 s
            # for 3,401 candidates x 300 trees on the CPU machine.
            X = np.where(np.isnan(X), 0.0, X)
        left, right, roots = _fold_constant(X, self._flat, plain)
        node = np.tile(roots, n)  # (row, tree) pairs, row-major
        base = np.repeat(np.arange(n) * X.shape[1], len(roots))  # each pair's row in X.ravel()
        live = np.flatnonzero(node >= 0)
        flat = X.ravel()
        while live.size:
            nd = node[live]
            x = flat[base[live] + feature[nd]]
            go_left = (x <= threshold[nd]) if plain else _goes_left(x, threshold[nd], missing[nd],
                                                                    default_left[nd], False)
            nxt = np.where(go_left, left[nd], right[nd])
            node[live] = nxt
            live = live[nxt >= 0]
        return leaf[~node].reshape(n, len(roots)).sum(axis=1)

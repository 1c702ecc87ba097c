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


class _Tree:
    __slots__ = ("feature", "threshold", "default_left", "missing", "left", "right", "leaf")

    def __init__(self, fields: dict[str, str]):
        def arr(name, dtype):
            return np.array(fields[name].split(), dtype=dtype) if fields.get(name) else np.zeros(0, dtype)
        self.leaf = arr("leaf_value", np.float64)
        if int(fields.get("num_leaves", "1")) <= 1:
            self.feature = np.zeros(0, np.int64)
            return
        if int(fields.get("num_cat", "0")):
            raise ModelError("this LightGBM model has categorical splits, which the numpy predictor "
                             "does not read; install lightgbm")
        self.feature = arr("split_feature", np.int64)
        self.threshold = arr("threshold", np.float64)
        dt = arr("decision_type", np.int64)
        if np.any(dt & 1):
            raise ModelError("this LightGBM model has categorical splits; install lightgbm")
        self.default_left = (dt & 2) != 0
        self.missing = (dt >> 2) & 3  # 0 none, 1 zero, 2 NaN
        self.left, self.right = arr("left_child", np.int64), arr("right_child", np.int64)


class TextBooster:
    """A LightGBM booster read from its text format (``Booster.model_to_string()``), for
    prediction: ``predict(X)`` is the raw score, the sum of every tree's leaf."""

    def __init__(self, text: str):
        head, _, body = text.partition("\nTree=")
        if not body or not head.startswith("tree"):
            raise ModelError("not a LightGBM text model (no 'tree' header or no trees)")
        header = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
        if int(header.get("num_class", "1")) != 1 or int(header.get("num_tree_per_iteration", "1")) != 1:
            raise ModelError("the numpy predictor reads single-output LightGBM models only")
        self.num_feature = int(header["max_feature_idx"]) + 1
        self.trees = []
        for block in ("Tree=" + body).split("\nTree="):
            block = block.split("end of trees")[0]
            fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
            self.trees.append(_Tree(fields))

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
                leaves.append(t.leaf[:1] if len(t.leaf) else np.zeros(1))
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

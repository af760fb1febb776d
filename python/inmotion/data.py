"""The inMotion RSSI dataset: loading, the stratified split and the reference preprocessing
(numpy only).

- Dataset path: $INMOTION_DATASET, else ../shared/data/inmotion/dataset.csv beside the repo
  (/work/shared/data/inmotion/dataset.csv), else the committed split CSVs
  tests/fixtures/inmotion/data/{train,test}.csv.
- Labels sorted alphabetically: AA 0, AB 1, BA 2, BB 3.
- Split: stratified 80/20 with seed 42, exactly scikit-learn's
  `train_test_split(X, y, test_size=0.2, stratify=y, random_state=42)` re-implemented in numpy
  (StratifiedShuffleSplit: n_test = ceil(0.2 n); per-class train/test counts by the
  "approximate mode" of the multivariate hypergeometric, ties broken with the RandomState;
  per class a RandomState permutation of its (stably sorted) indices, first n_i to train, next
  t_i to test; finally both index lists are permuted). test_inmotion.py checks it against
  scikit-learn when that is importable.
- Standardization: per reading column (window position), mean and population std (ddof 0, as
  StandardScaler) fitted on the TRAINING split only (the dataset README fits on the whole
  dataset; we fit on train so that the test windows are unseen), rounded to f32 and recorded in
  meta.json `preprocess`. Features raw z, diff1, diff2, dev (z - mean of the window's z), computed
  in f64 and rounded once to f32 (as the Rust runtime's preprocess.rs).
"""

from __future__ import annotations

import csv
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _find_repo():
    """$INMOTION_REPO, else the checkout this package lives in (python/inmotion), else the first
    directory above the working directory holding tests/fixtures (an installed console script)."""
    if os.environ.get("INMOTION_REPO"):
        return os.path.abspath(os.environ["INMOTION_REPO"])
    up = os.path.dirname(os.path.dirname(HERE))
    if os.path.isdir(os.path.join(up, "tests", "fixtures")):
        return up
    d = os.getcwd()
    while True:
        if os.path.isdir(os.path.join(d, "tests", "fixtures")) and os.path.isfile(os.path.join(d, "Cargo.toml")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return up
        d = parent


REPO = _find_repo()
FIX_DIR = os.path.join(REPO, "tests", "fixtures", "inmotion")
SPLIT_DIR = os.path.join(FIX_DIR, "data")
DEFAULT_DATASET = os.path.join(os.path.dirname(REPO), "shared", "data", "inmotion", "dataset.csv")
CLASSES = ["AA", "AB", "BA", "BB"]
FEATURES = ["raw", "diff1", "diff2", "dev"]
SEQ_LEN = 10
SEED = 42


def dataset_path():
    p = os.environ.get("INMOTION_DATASET")
    if p:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"INMOTION_DATASET={p}: no such file")
        return p
    if os.path.isfile(DEFAULT_DATASET):
        return DEFAULT_DATASET
    return None


def read_csv(path):
    """-> (header, rows as lists of strings)."""
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        rows = [row for row in r if row]
    return header, rows


def readings_labels(header, rows):
    cols = [header.index(str(i)) for i in range(1, SEQ_LEN + 1)]
    li = header.index("label")
    X = np.array([[float(row[c]) for c in cols] for row in rows], dtype=np.float64)
    y = np.array([CLASSES.index(row[li]) for row in rows], dtype=np.int64)
    return X, y


def _approximate_mode(class_counts, n_draws, rng):
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        values = np.sort(np.unique(remainder))[::-1]
        for value in values:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            inds = rng.choice(inds, size=add_now, replace=False)
            floored[inds] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def stratified_split(y, test_size=0.2, seed=SEED):
    """-> (train_idx, test_idx), identical to sklearn's train_test_split(stratify=y)."""
    y = np.asarray(y)
    n = len(y)
    n_test = int(math.ceil(test_size * n))
    n_train = n - n_test
    classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
    class_indices = np.split(np.argsort(y_idx, kind="stable"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(counts, n_train, rng)
    t_i = _approximate_mode(counts - n_i, n_test, rng)
    train, test = [], []
    for i in range(len(classes)):
        perm = rng.permutation(counts[i])
        idx = class_indices[i].take(perm, mode="clip")
        train.extend(idx[: n_i[i]])
        test.extend(idx[n_i[i]: n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def fit_scaler(X_train):
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)  # ddof 0
    std = np.where(std == 0, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


def preprocess(raw, mean, std, features=FEATURES):
    """raw [N, T] readings -> windows [N, T, len(features)] f32, as meta.json `preprocess`.
    Readings, mean and std are f32 values; every feature is computed in f64 (mean(z) as a
    sequential sum over the window / T) and rounded once to f32, as the Rust runtime does."""
    raw = np.asarray(raw, np.float32).astype(np.float64)
    mean = np.asarray(mean, np.float32).astype(np.float64)
    std = np.asarray(std, np.float32).astype(np.float64)
    z = (raw - mean) / std
    d1 = np.zeros_like(z)
    d1[:, 1:] = z[:, 1:] - z[:, :-1]
    d2 = np.zeros_like(z)
    d2[:, 1:] = d1[:, 1:] - d1[:, :-1]
    acc = np.zeros(z.shape[0], np.float64)
    for t in range(z.shape[1]):
        acc = acc + z[:, t]
    dev = z - (acc / z.shape[1])[:, None]
    chans = {"raw": z, "diff1": d1, "diff2": d2, "dev": dev}
    return np.stack([chans[f] for f in features], axis=2).astype(np.float32)


class Split:
    """Everything the trainer, exporter and eval need from the data."""

    def __init__(self, header, train_rows, test_rows, source):
        self.header = header
        self.train_rows = train_rows
        self.test_rows = test_rows
        self.source = source
        self.Xtr_raw, self.ytr = readings_labels(header, train_rows)
        self.Xte_raw, self.yte = readings_labels(header, test_rows)
        self.mean, self.std = fit_scaler(self.Xtr_raw)
        self.Xtr = preprocess(self.Xtr_raw, self.mean, self.std)
        self.Xte = preprocess(self.Xte_raw, self.mean, self.std)

    def preprocess_meta(self):
        return {"standardize": {"mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]},
                "features": list(FEATURES)}

    def write_csvs(self, out_dir=SPLIT_DIR):
        os.makedirs(out_dir, exist_ok=True)
        for name, rows in (("train", self.train_rows), ("test", self.test_rows)):
            with open(os.path.join(out_dir, f"{name}.csv"), "w", newline="") as f:
                w = csv.writer(f, lineterminator="\n")
                w.writerow(self.header)
                w.writerows(rows)

    def golden_windows(self, n=16):
        """n real test windows, round-robin over the classes (first of each class, then second, ...)."""
        per = [list(np.where(self.yte == k)[0]) for k in range(len(CLASSES))]
        idx = []
        i = 0
        while len(idx) < n:
            for k in range(len(CLASSES)):
                if i < len(per[k]) and len(idx) < n:
                    idx.append(per[k][i])
            i += 1
        return [int(j) for j in idx], self.Xte[idx]


_CACHE = {}


def load_split(require_dataset=False):
    p = dataset_path()
    key = p or "committed"
    if key in _CACHE:
        return _CACHE[key]
    if p:
        header, rows = read_csv(p)
        _, y = readings_labels(header, rows)
        tr, te = stratified_split(y)
        s = Split(header, [rows[i] for i in tr], [rows[i] for i in te], p)
    else:
        if require_dataset:
            raise FileNotFoundError("the inMotion dataset was not found: set INMOTION_DATASET")
        h1, trr = read_csv(os.path.join(SPLIT_DIR, "train.csv"))
        h2, ter = read_csv(os.path.join(SPLIT_DIR, "test.csv"))
        assert h1 == h2
        s = Split(h1, trr, ter, SPLIT_DIR)
    _CACHE[key] = s
    return s


def mcc(y_true, y_pred, k=len(CLASSES)):
    """Multiclass Matthews correlation coefficient (as sklearn.metrics.matthews_corrcoef)."""
    C = np.zeros((k, k), np.float64)
    for t, p in zip(y_true, y_pred):
        C[t, p] += 1
    t_sum = C.sum(axis=1)
    p_sum = C.sum(axis=0)
    n_correct = np.trace(C)
    n = C.sum()
    cov_ytyp = n_correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))

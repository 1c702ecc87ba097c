"""ResultStore's export: every row to CSV or Parquet, written beside the target and renamed."""

from __future__ import annotations

import csv
import os
from dataclasses import asdict
from pathlib import Path

from ..jsonio import replacing
from .rows import COLUMNS, FLOAT_FIELDS
from .schema import StoreError


class Export:
    """A mixin of ResultStore (``self.rows()``)."""

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every row to ``path`` (.csv or .parquet); returns the row count.

        Columns are the context columns followed by the ResultRow fields. The
        file is written beside the target and renamed into place, so a reader
        never sees a half-written export.

        Example::

            >>> store.export("results.csv")                     # doctest: +SKIP
            1234
        """
        out = Path(path)
        suffix = out.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise StoreError(f"cannot export to {out}: unknown suffix {out.suffix!r}; use .csv or .parquet")
        if not out.parent.is_dir():
            raise StoreError(f"cannot export to {out}: directory {out.parent} does not exist")
        records = [tuple(asdict(c).values()) + tuple(asdict(r).values()) for c, r in self.rows()]
        # Temp file, fsync, rename, symlinks and file mode: jsonio.replacing.
        with replacing(out, mode=None) as tmp:
            if suffix == ".csv":
                self._write_csv(tmp, records)
            else:
                self._write_parquet(tmp, out, records)
        return len(records)

    @staticmethod
    def _write_csv(tmp: Path, records: list[tuple]) -> None:
        # csv writes None as an empty field and floats with repr(), which reads
        # back to the identical float.
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            w.writerows(records)

    @staticmethod
    def _write_parquet(tmp: Path, out: Path, records: list[tuple]) -> None:
        hint = f"cannot export to {out}: parquet needs pandas and pyarrow (pip install pandas pyarrow)"
        try:
            import pandas as pd
        except ImportError:
            raise StoreError(hint) from None
        df = pd.DataFrame.from_records(records, columns=list(COLUMNS))
        # Explicit dtypes: an all-None column would otherwise become 'object'
        # and a nullable int column would turn into floats.
        dtypes = {c: "string" for c in COLUMNS}
        dtypes.update({c: "float64" for c in FLOAT_FIELDS})
        dtypes.update({"m": "int64", "n": "int64", "k": "int64", "aligned": "bool", "repeats": "Int64"})
        df = df.astype(dtypes)
        try:
            df.to_parquet(tmp, index=False)
        except ImportError:
            raise StoreError(hint) from None

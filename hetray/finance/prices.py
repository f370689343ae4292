"""Daily price tables: the wide CSV, a folder of per-ticker OHLCV files, a sector table.

Glossary: ``T`` trading days, ``N`` tickers.

=====================  =================================================================
layout                 file
=====================  =================================================================
wide CSV               ``Date,AAPL,MSFT,...`` one row per day, one column per ticker
                       (``.csv`` or ``.csv.gz``; the date column may be named ``date``)
per-ticker folder      ``DIR/TICKER.csv`` each ``Date,Open,High,Low,Close,Adj Close,Volume``
                       (Yahoo); ``Adj Close`` is used, ``Close`` when it is absent
sector table           ``ticker,sector`` (optional); tickers it does not name get ``unknown``
=====================  =================================================================

Rules (every violation is a :class:`~hetray.core.errors.GraphDataError` naming the file,
the column, the row (1-based file line) and the value):

- dates parse, are unique and strictly increasing;
- every price present is a finite number > 0;
- a ticker is listed from its first to its last price: empty cells *before* the first or
  *after* the last are "not listed" (late IPOs in ``stock_prices.csv``), an empty cell
  *between* two prices is refused (hetray never forward-fills silently);
- a ticker needs at least ``min_history`` prices.

Gaps are handled by the windows, never by filling: a ticker enters a formation window only
when it has a price on every day of it (:func:`complete_in`); in a trading period a pair is
closed on the last day both legs have prices.

Example:
    >>> import numpy as np
    >>> p = Prices(dates=np.array(["2020-01-01", "2020-01-02"], "datetime64[D]"),
    ...            tickers=("A", "B"), values=np.array([[1.0, 2.0], [1.1, np.nan]]),
    ...            sectors=("x", "x"), source="demo")
    >>> complete_in(p.values, 0, 2).tolist()
    [True, False]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hetray.core.errors import GraphDataError

logger = logging.getLogger(__name__)

#: Sector of a ticker the sector table does not name (or without a table).
UNKNOWN_SECTOR = "unknown"
#: Fewest prices a ticker may have (a 60-day correlation window needs 61).
DEFAULT_MIN_HISTORY = 61
#: Names the date column may have, and the price column of a per-ticker file, in preference.
DATE_COLUMNS = ("Date", "date", "DATE")
PRICE_COLUMNS = ("Adj Close", "Close")


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """Adjusted close prices of ``N`` tickers on ``T`` trading days.

    Attributes:
        dates: datetime64[D] (T,), strictly increasing.
        tickers: the ``N`` column names.
        values: float64 (T, N); NaN before a ticker's first or after its last price.
        sectors: the sector of each ticker (``unknown`` when not given).
        source: the file or folder read, for messages.
    """

    dates: np.ndarray
    tickers: tuple[str, ...]
    values: np.ndarray
    sectors: tuple[str, ...]
    source: str

    @property
    def num_days(self) -> int:
        """``T``."""
        return len(self.dates)

    @property
    def num_tickers(self) -> int:
        """``N``."""
        return len(self.tickers)

    def sector_ids(self) -> np.ndarray:
        """int64 (N,) sector of each ticker as an index into the sorted distinct sectors."""
        return np.unique(np.array(self.sectors), return_inverse=True)[1].astype(np.int64)

    def with_values(self, values: np.ndarray) -> Prices:
        """The same table with other prices (float64 (T, N)); e.g. a perturbed copy."""
        return Prices(dates=self.dates, tickers=self.tickers, values=values,
                      sectors=self.sectors, source=self.source)


def complete_in(values: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Bool (N,): the tickers with a price on every day of rows ``[start, stop)``."""
    return np.isfinite(values[start:stop]).all(axis=0)


def _read_csv(path: Path) -> pd.DataFrame:
    """Every cell of ``path`` as text (compressed by name: ``.gz``, ...).

    Raises:
        GraphDataError: a file pandas cannot parse (its reason on one line).
    """
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError, OSError, EOFError) as err:
        reason = " ".join(str(err).split())
        raise GraphDataError(str(path), "file", path.name,
                             f"not a readable CSV ({reason})") from err


def _date_column(frame: pd.DataFrame, path: str) -> str:
    for name in DATE_COLUMNS:
        if name in frame.columns:
            return name
    raise GraphDataError(path, "Date", list(frame.columns)[:8],
                         f"no date column (one of {', '.join(DATE_COLUMNS)})")


def _dates(raw: pd.Series, path: str, column: str) -> np.ndarray:
    """datetime64[D] (T,) from the date column; unique and strictly increasing."""
    parsed = pd.to_datetime(raw, errors="coerce", format="mixed")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if len(bad):
        raise GraphDataError(path, column, raw.iloc[bad[0]], f"row {bad[0] + 2}: not a date")
    days = parsed.to_numpy().astype("datetime64[D]")
    step = np.diff(days.astype(np.int64))
    bad = np.flatnonzero(step <= 0)
    if len(bad):
        what = "duplicate date" if step[bad[0]] == 0 else "date earlier than the row before"
        raise GraphDataError(path, column, raw.iloc[bad[0] + 1],
                             f"row {bad[0] + 3}: {what} (dates must be strictly increasing)")
    return days


def _price_column(raw: pd.Series, path: str, column: str) -> np.ndarray:
    """float64 (T,) prices of one ticker; NaN only before the first / after the last."""
    text = raw.astype("string").str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
    empty = text.isna().to_numpy() | (text == "").fillna(True).to_numpy()
    bad = np.flatnonzero(~empty & ~(np.isfinite(values) & (values > 0)))
    if len(bad):
        raise GraphDataError(path, column, raw.iloc[bad[0]],
                             f"row {bad[0] + 2}: a price must be a finite number > 0")
    present = np.flatnonzero(~empty)
    if len(present):
        holes = np.flatnonzero(empty[present[0]:present[-1] + 1])
        if len(holes):
            row = present[0] + holes[0]
            raise GraphDataError(path, column, "", f"row {row + 2}: missing price between "
                                 "two prices (hetray does not forward-fill; fill or drop it)")
    values[empty] = np.nan
    return values


def _check_history(values: np.ndarray, tickers: tuple[str, ...], path: str,
                   min_history: int) -> None:
    counts = np.isfinite(values).sum(axis=0)
    for ticker, count in zip(tickers, counts, strict=True):
        if count < min_history:
            raise GraphDataError(path, ticker, int(count), f"only {count} prices; at least "
                                 f"{min_history} needed (drop the ticker or lower min_history)")


def read_wide_csv(path: Path, min_history: int = DEFAULT_MIN_HISTORY) -> Prices:
    """Read ``Date,TICKER,...`` (``.csv`` or ``.csv.gz``) into :class:`Prices`.

    Raises:
        GraphDataError: a missing file, a bad date or price, a gap, too little history.
    """
    name = str(path)
    if not path.is_file():
        raise GraphDataError(name, "file", name, "file not found")
    frame = _read_csv(path)
    date_col = _date_column(frame, name)
    tickers = tuple(str(c).strip() for c in frame.columns if c != date_col)
    if not tickers or len(set(tickers)) != len(tickers) or "" in tickers:
        raise GraphDataError(name, "header", list(frame.columns)[:8],
                             "needs at least one ticker column, every name distinct and given")
    if frame.empty:
        raise GraphDataError(name, date_col, "", "the file holds no rows")
    dates = _dates(frame[date_col], name, date_col)
    values = np.stack([_price_column(frame[c], name, t)
                       for c, t in zip((c for c in frame.columns if c != date_col), tickers,
                                       strict=True)], axis=1)
    _check_history(values, tickers, name, min_history)
    return Prices(dates=dates, tickers=tickers, values=values,
                  sectors=(UNKNOWN_SECTOR,) * len(tickers), source=name)


def _read_ticker_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(dates, prices) of one ``TICKER.csv`` (Yahoo OHLCV)."""
    name = str(path)
    frame = _read_csv(path)
    date_col = _date_column(frame, name)
    column = next((c for c in PRICE_COLUMNS if c in frame.columns), None)
    if column is None or frame.empty:
        raise GraphDataError(name, "Adj Close", list(frame.columns)[:8],
                             "needs rows and an 'Adj Close' (or 'Close') column")
    return _dates(frame[date_col], name, date_col), _price_column(frame[column], name, column)


def read_ticker_folder(folder: Path, min_history: int = DEFAULT_MIN_HISTORY) -> Prices:
    """Read every ``*.csv`` in ``folder`` (one ticker each, named by the file stem).

    Days are the union of the files' dates; a ticker without a row on a day inside its
    listed span is refused like an empty cell (rule 3 of the module doc).

    Raises:
        GraphDataError: no files, a bad file, a gap, too little history.
    """
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise GraphDataError(str(folder), "folder", str(folder), "holds no TICKER.csv files")
    series = {f.stem: pd.Series(v, index=d) for f, (d, v) in
              ((f, _read_ticker_file(f)) for f in files)}
    frame = pd.DataFrame(series).sort_index()
    for ticker, file in zip(frame.columns, files, strict=True):
        present = np.flatnonzero(np.isfinite(frame[ticker].to_numpy()))
        if not len(present):
            raise GraphDataError(str(file), "Adj Close", "", "the file holds no prices")
        holes = np.flatnonzero(~np.isfinite(frame[ticker].to_numpy()[present[0]:present[-1]]))
        if len(holes):
            day = frame.index[present[0] + holes[0]]
            raise GraphDataError(str(file), "Date", str(day)[:10], "no row on a trading day "
                                 "inside the ticker's listed span (other files have it)")
    values = frame.to_numpy(np.float64)
    tickers = tuple(str(t) for t in frame.columns)
    _check_history(values, tickers, str(folder), min_history)
    return Prices(dates=frame.index.to_numpy().astype("datetime64[D]"), tickers=tickers,
                  values=values, sectors=(UNKNOWN_SECTOR,) * len(tickers), source=str(folder))


def read_sectors(path: Path) -> dict[str, str]:
    """``{ticker: sector}`` from a ``ticker,sector`` CSV (header required).

    Raises:
        GraphDataError: a missing file or column, an empty cell, a ticker named twice.
    """
    name = str(path)
    if not path.is_file():
        raise GraphDataError(name, "file", name, "file not found")
    frame = _read_csv(path)
    cols = {str(c).strip().lower(): c for c in frame.columns}
    if "ticker" not in cols or "sector" not in cols:
        raise GraphDataError(name, "header", list(frame.columns)[:8],
                             "needs the columns 'ticker' and 'sector'")
    out: dict[str, str] = {}
    for row, (ticker, sector) in enumerate(zip(frame[cols["ticker"]].str.strip(),
                                               frame[cols["sector"]].str.strip(),
                                               strict=True), start=2):
        if not ticker or not sector or ticker in out:
            what = "named twice" if ticker in out else "an empty cell"
            raise GraphDataError(name, "ticker" if ticker in out or not ticker else "sector",
                                 ticker or sector, f"row {row}: {what}")
        out[ticker] = sector
    return out


def load_prices(path: Path, sectors: Path | None = None,
                min_history: int = DEFAULT_MIN_HISTORY) -> Prices:
    """A wide CSV (a file) or a per-ticker folder (a directory), with optional sectors."""
    prices = read_ticker_folder(path, min_history) if path.is_dir() \
        else read_wide_csv(path, min_history)
    if sectors is None:
        return prices
    table = read_sectors(sectors)
    return Prices(dates=prices.dates, tickers=prices.tickers, values=prices.values,
                  sectors=tuple(table.get(t, UNKNOWN_SECTOR) for t in prices.tickers),
                  source=prices.source)

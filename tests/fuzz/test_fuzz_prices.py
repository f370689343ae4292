"""Fuzz the price loaders of ``hetray finance``: wide CSV, per-ticker folder, sector table.

Seeds are small valid files written here; see :mod:`tests.fuzz.harness` for the property
(every input either loads into a sane table or raises one HetrayError naming the file or
folder, within the time and memory bounds). A small, fixed example count per test.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given

from hetray.finance.prices import Prices, load_prices, read_sectors
from tests.fuzz.harness import check_loader, fuzz_settings, written
from tests.fuzz.mutations import file_set_mutants, text_mutants

WIDE = b"Date,AAA,BBB\n2020-01-01,1.0,2.0\n2020-01-02,1.1,2.1\n2020-01-03,,2.2\n"
OHLCV = (b"Date,Open,High,Low,Close,Adj Close,Volume\n2020-01-01,1,1,1,1,0.9,10\n"
         b"2020-01-02,1,1,1,1.1,1.0,12\n")
SECTORS = b"ticker,sector\nAAA,Energy\nBBB,Tech\n"


def valid_prices(prices: Prices) -> None:
    """What every loaded table must satisfy."""
    t, n = prices.values.shape
    assert len(prices.dates) == t
    assert len(prices.tickers) == len(prices.sectors) == n
    assert (np.diff(prices.dates.astype(np.int64)) > 0).all()
    present = prices.values[np.isfinite(prices.values)]
    assert (present > 0).all()


@fuzz_settings(60)
@given(text_mutants(WIDE))
def test_wide_csv(data):
    with written({"prices.csv": data}) as root:
        check_loader("prices-wide", lambda: load_prices(root / "prices.csv", min_history=1),
                     root / "prices.csv", valid_prices)


@fuzz_settings(40)
@given(file_set_mutants({"AAA.csv": OHLCV, "BBB.csv": OHLCV},
                        {"AAA.csv": text_mutants(OHLCV), "BBB.csv": text_mutants(OHLCV)}))
def test_ticker_folder(files):
    with written(files) as root:
        check_loader("prices-folder", lambda: load_prices(root, min_history=1), root,
                     valid_prices)


@fuzz_settings(40)
@given(text_mutants(SECTORS))
def test_sector_table(data):
    with written({"sectors.csv": data}) as root:
        check_loader("prices-sectors", lambda: read_sectors(root / "sectors.csv"),
                     root / "sectors.csv")

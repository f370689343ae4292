"""Price loaders: the real files load, and every bad input names its file, column and value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetray.core.errors import GraphDataError
from hetray.finance.prices import (
    complete_in,
    load_prices,
    read_sectors,
    read_ticker_folder,
    read_wide_csv,
)

GOOD = "Date,AAA,BBB\n" + "".join(f"2020-01-{d:02d},{1 + d / 10},{2 + d / 10}\n"
                                  for d in range(1, 10))


def _write(tmp_path: Path, text: str, name: str = "prices.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_wide_csv_reads_dates_tickers_and_leading_gaps(tmp_path):
    text = GOOD.replace("2020-01-01,1.1,", "2020-01-01,,")
    prices = read_wide_csv(_write(tmp_path, text), min_history=5)
    assert prices.tickers == ("AAA", "BBB")
    assert prices.values.shape == (9, 2)
    assert np.isnan(prices.values[0, 0])
    assert prices.values[1, 0] == pytest.approx(1.2)
    assert complete_in(prices.values, 0, 9).tolist() == [False, True]
    assert complete_in(prices.values, 1, 9).tolist() == [True, True]


@pytest.mark.parametrize(("edit", "column", "value"), [
    (lambda t: t.replace("2020-01-03,1.3", "2020-01-03,-1.3"), "AAA", "-1.3"),
    (lambda t: t.replace("2020-01-03,1.3", "2020-01-03,0"), "AAA", "0"),
    (lambda t: t.replace("2020-01-03,1.3", "2020-01-03,abc"), "AAA", "abc"),
    (lambda t: t.replace("2020-01-04,1.4,", "2020-01-04,,"), "AAA", ""),
    (lambda t: t.replace("2020-01-05", "2020-01-04"), "Date", "2020-01-04"),
    (lambda t: t.replace("2020-01-05", "2020-01-02"), "Date", "2020-01-02"),
    (lambda t: t.replace("2020-01-05", "yesterday"), "Date", "yesterday"),
])
def test_each_bad_input_names_file_column_and_value(tmp_path, edit, column, value):
    path = _write(tmp_path, edit(GOOD))
    with pytest.raises(GraphDataError) as info:
        read_wide_csv(path, min_history=5)
    err = info.value
    assert (err.file, err.column, str(err.value)) == (str(path), column, value)
    assert str(path) in str(err)
    assert "row " in err.problem


def test_too_little_history_names_the_ticker_and_count(tmp_path):
    path = _write(tmp_path, GOOD)
    with pytest.raises(GraphDataError) as info:
        read_wide_csv(path, min_history=20)
    assert (info.value.column, info.value.value) == ("AAA", 9)


def test_per_ticker_folder_and_sectors(tmp_path):
    for ticker, base in (("AAA", 1.0), ("BBB", 2.0)):
        rows = "".join(f"2020-01-{d:02d},1,1,1,{base + d},{base + d / 10},100\n"
                       for d in range(1, 10))
        _write(tmp_path, "Date,Open,High,Low,Close,Adj Close,Volume\n" + rows, f"{ticker}.csv")
    sectors = _write(tmp_path, "ticker,sector\nAAA,Energy\n", "sectors.txt")
    prices = load_prices(tmp_path, sectors, min_history=5)
    assert prices.tickers == ("AAA", "BBB")
    assert prices.sectors == ("Energy", "unknown")
    assert prices.values[0].tolist() == pytest.approx([1.1, 2.1])  # Adj Close, not Close
    (tmp_path / "BBB.csv").write_text("Date,Open,High,Low,Close,Adj Close,Volume\n"
                                      "2020-01-01,1,1,1,1,0,1\n", encoding="utf-8")
    with pytest.raises(GraphDataError) as info:
        read_ticker_folder(tmp_path, min_history=1)
    assert info.value.file.endswith("BBB.csv")
    assert info.value.value == "0"


def test_sector_table_errors_name_the_row(tmp_path):
    path = _write(tmp_path, "ticker,sector\nAAA,Energy\nAAA,Tech\n", "s.csv")
    with pytest.raises(GraphDataError) as info:
        read_sectors(path)
    assert info.value.value == "AAA"
    assert "row 3" in info.value.problem


def test_the_shared_price_sets_load(shared_data):
    sp500 = load_prices(shared_data / "skfolio_sp500" / "sp500_dataset.csv.gz")
    assert sp500.values.shape == (8313, 20)
    assert np.isfinite(sp500.values).all()
    pyp = load_prices(shared_data / "pypfopt_stock_prices" / "stock_prices.csv")
    assert pyp.values.shape == (7126, 20)
    assert np.isfinite(pyp.values).sum(axis=0)[pyp.tickers.index("FB")] == 1483

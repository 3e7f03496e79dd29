"""How figures are written in the report."""


def fmt_s(x):
    return "" if x is None else f"{x:.3f}"


def fmt_ratio(x):
    return "" if x is None else f"{x:.2f}"


def fmt_big(n):
    if n is None:
        return ""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def fmt_pct(x):
    return "" if x is None else f"{100 * (x - 1):+.1f}%"


def fmt_sci(n):
    if n is None:
        return ""
    return f"{n:.3g}" if n >= 1e6 else str(n)

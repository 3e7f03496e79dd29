"""The chart (docs/benchmarks.svg)."""
import math

from .variants import VAR


PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1b9e77", "#d95f02"]


# anchors in blues, naive baselines in greys, tally's placements in warm colours
COLORS = {"clang-pgo-ir": "#1f4e79", "clang-pgo-fe": "#6a9fd4", "gcc-arcs": "#9ecae1",
          "blocks-naive": "#969696", "edges-naive": "#cccccc", "edge": "#d62728", "edge-nojump": "#ff7f0e", "edge-estimate": "#bcbd22", "edge-nopromote": "#e377c2", "edge-exact": "#ff9896",
          "vertex": "#f28e2b", "path": "#8c564b", "events": "#2ca02c", "events-naive": "#98df8a",
          "ipath": "#c49c94", "ipath-piecewise": "#9467bd",
          "trace": "#000000", "trace-naive": "#555555"}


def luminance(hexcolor):
    r, g, b = (int(hexcolor[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_svg(res):
    """Two panels of grouped bars (time and instruction overhead, %), one group per program plus
    the geomean, one bar per instrumented variant. Hand-written SVG, no dependencies."""
    progs = {n: p for n, p in res["programs"].items() if "variants" in p}
    vs = [v["name"] for v in res["variants"] if VAR[v["name"]]["role"] != "plain"
          and any(p["variants"].get(v["name"], {}).get("ratio") or p["variants"].get(v["name"], {}).get("instr_ratio")
                  for p in progs.values())]
    groups = list(progs) + ["geomean"]
    color = {v: COLORS.get(v) or PALETTE[i % len(PALETTE)] for i, v in enumerate(vs)}
    left, top, ph, pgap, gap = 60, 40, 240, 70, 14
    gw = max((1100 - left - 20) / len(groups), max(1, len(vs)) * 6 + gap)
    bar = min(16.0, (gw - gap) / max(1, len(vs)))
    width = int(left + len(groups) * gw + 20)
    per_row = max(1, (width - left) // 200)
    legend_rows = (len(vs) + per_row - 1) // per_row
    height = top + 2 * ph + pgap + 40 + 18 * legend_rows
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14" font-weight="bold">Overhead against the plain build of the same compiler'
           f'{" (QUICK SMOKE RUN)" if res["meta"].get("quick") else ""}</text>']
    for panel, (field, title) in enumerate((("ratio", "wall time, median (%)"),
                                            ("instr_ratio", "instructions, callgrind (%)"))):
        y0 = top + panel * (ph + pgap)

        def val(g, v):
            if g == "geomean":
                r = res["geomean"].get(v, {}).get(field)
            else:
                r = progs[g]["variants"].get(v, {}).get(field)
            return None if r is None else 100 * (r - 1)
        vals = [x for g in groups for v in vs for x in [val(g, v)] if x is not None]
        hi = min(max([10.0] + vals), CLIP)  # bars above CLIP are cut, their value written on top
        lo = max(min([0.0] + vals), -CLIP)
        step = nice_step((hi - lo) / 5)
        hi = math.ceil(hi / step) * step
        lo = math.floor(lo / step) * step

        def y(x):
            return y0 + ph * (hi - x) / (hi - lo)
        out.append(f'<text x="{left}" y="{y0 - 8}" font-weight="bold">{esc(title)}</text>')
        t = lo
        while t <= hi + 1e-9:
            out.append(f'<line x1="{left}" x2="{width - 20}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
                       f'stroke="{"#444" if abs(t) < 1e-9 else "#ddd"}" stroke-width="1"/>')
            out.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
            t += step
        for gi, g in enumerate(groups):
            x0 = left + gi * gw + (gw - len(vs) * bar) / 2
            for vi, v in enumerate(vs):
                x = val(g, v)
                if x is None:
                    continue
                xc = min(max(x, lo), hi)
                ya, yb = sorted((y(0), y(xc)))
                out.append(f'<rect x="{x0 + vi * bar:.1f}" y="{ya:.1f}" width="{bar - 1:.1f}" height="{max(0.5, yb - ya):.1f}" '
                           f'fill="{color[v]}"><title>{esc(g)} {esc(v)}: {x:+.1f}%</title></rect>')
                if xc != x:  # clipped: the value, vertically, on the bar
                    cx, cy = x0 + vi * bar + bar / 2 + 3, y(hi) + 2
                    ink = "white" if luminance(color[v]) < 0.5 else "black"
                    out.append(f'<text x="{cx:.1f}" y="{cy:.1f}" font-size="9" fill="{ink}" text-anchor="end" '
                               f'transform="rotate(-90 {cx:.1f} {cy:.1f})">{x:+.0f}%</text>')
            out.append(f'<text x="{x0 + len(vs) * bar / 2:.1f}" y="{y0 + ph + 14}" text-anchor="middle" '
                       f'font-weight="{"bold" if g == "geomean" else "normal"}">{esc(g)}</text>')
    ly = top + 2 * ph + pgap + 30
    for i, v in enumerate(vs):
        lx = left + (i % per_row) * 200
        yy = ly + (i // per_row) * 18
        out.append(f'<rect x="{lx}" y="{yy - 9}" width="10" height="10" fill="{color[v]}"/>')
        out.append(f'<text x="{lx + 14}" y="{yy}">{esc(v)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


CLIP = 100.0  # % overhead: the chart's scale stops here (path mode can reach +300%)


def nice_step(x):
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e

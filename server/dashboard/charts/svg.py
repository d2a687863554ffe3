"""SVG building blocks; every piece of text and every attribute value is escaped here."""

from __future__ import annotations

from markupsafe import Markup, escape


def number(value: float) -> str:
    """A coordinate, short and exact enough for pixels."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def label(value: float) -> str:
    """A data value for an axis or tooltip: integers plain, others with 3 significant digits."""
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}"


def element(tag: str, content: str | Markup = "", **attrs: object) -> Markup:
    """`<tag attrs>content</tag>`; `content` is escaped unless it is already Markup.

    Attribute names use `_` for `-` (`text_anchor` -> `text-anchor`); `class_` -> `class`.
    """
    parts = [tag]
    for name, value in attrs.items():
        if value is None:
            continue
        attr = name.rstrip("_").replace("_", "-")
        parts.append(f'{attr}="{escape(value if isinstance(value, str) else _attr(value))}"')
    return Markup(f"<{' '.join(parts)}>{escape(content)}</{tag}>")


def _attr(value: object) -> str:
    return number(value) if isinstance(value, float) else str(value)


def document(width: int, height: int, title: str, body: list[Markup], class_: str = "chart") -> Markup:
    """A complete, responsive `<svg>` with an accessible title."""
    inner = Markup("").join([element("title", title), *body])
    return element("svg", inner, class_=class_, width=width, height=height,
                   viewBox=f"0 0 {width} {height}", role="img",
                   aria_label=title, xmlns="http://www.w3.org/2000/svg",
                   preserveAspectRatio="xMidYMid meet")


def empty(width: int, height: int, title: str, message: str) -> Markup:
    """A chart with nothing to plot: its frame and a line saying why."""
    return document(width, height, title, [
        element("text", message, x=width / 2, y=height / 2, text_anchor="middle", class_="chart-empty"),
    ])


def shorten(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (the full text goes in a tooltip)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"

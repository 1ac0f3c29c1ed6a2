#!/usr/bin/env python3
"""Reads a pybpfprof SVG flame graph with a real XML parser (xml.etree, i.e. expat) and
prints what it draws as one JSON object:

  {"width": W, "height": H, "title": ..., "subtitle": ..., "empty": text or null,
   "script": true when it has a non-empty <script>,
   "frames": [{"label", "info", "x", "y", "w", "fill", "text"}, ...]}   (document order)

A frame is a <g class="f"> of the group #frames: its <title> is "label\\ninfo", its <rect>
gives x, y, w and fill, its <text> the label as drawn (possibly cut to fit).
Usage: svg_frames.py FILE. Exits 1 with one line on stderr when FILE is not well-formed
XML or not such an SVG.
"""
import json
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main():
    if len(sys.argv) != 2:
        print("usage: svg_frames.py FILE", file=sys.stderr)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except ET.ParseError as e:
        print(f"svg_frames: {sys.argv[1]} is not well-formed XML: {e}", file=sys.stderr)
        return 1
    if root.tag != NS + "svg":
        print(f"svg_frames: the root element is {root.tag}, not an SVG <svg>", file=sys.stderr)
        return 1

    def by_id(i):
        for el in root.iter():
            if el.get("id") == i:
                return el
        return None

    group = by_id("frames")
    if group is None:
        print("svg_frames: no <g id=\"frames\">", file=sys.stderr)
        return 1
    frames = []
    for g in group.findall(NS + "g"):
        title, rect, text = g.find(NS + "title"), g.find(NS + "rect"), g.find(NS + "text")
        if title is None or rect is None or text is None:
            print("svg_frames: a frame without its title, rect or text", file=sys.stderr)
            return 1
        label, _, info = (title.text or "").partition("\n")
        frames.append({
            "label": label, "info": info,
            "x": float(rect.get("x")), "y": float(rect.get("y")), "w": float(rect.get("width")),
            "fill": rect.get("fill"), "text": text.text or "",
        })
    script = root.find(NS + "script")
    subtitle, empty, title = by_id("subtitle"), by_id("empty"), root.find(NS + "title")
    print(json.dumps({
        "width": float(root.get("width")), "height": float(root.get("height")),
        "title": title.text if title is not None else None,
        "subtitle": subtitle.text if subtitle is not None else None,
        "empty": empty.text if empty is not None else None,
        "script": script is not None and bool((script.text or "").strip()),
        "frames": frames,
    }, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

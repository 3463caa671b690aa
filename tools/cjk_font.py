"""The CJK font the site serves: Noto Sans SC, subset to the characters the built pages use.

    python tools/cjk_font.py chars PATH ...      # the CJK characters in these files (sources or built pages)
    python tools/cjk_font.py check PATH ...      # exit 1 if any of them is missing from the source font
    python tools/cjk_font.py subset SITE_DIR     # write SITE_DIR/_static/fonts/course-cjk.woff2 (+ licence)
    python tools/cjk_font.py fetch               # re-create tools/fonts/ from the npm registry (needs npm)

Readers without a CJK system font (a minimal Linux, many containers) saw every Chinese quotation as empty boxes.
The site therefore serves its own font. The source is Noto Sans SC (SIL Open Font License 1.1), regular weight,
as packaged on the npm registry by Fontsource: ``@fontsource/noto-sans-sc`` 5.3.0, file
``files/noto-sans-sc-chinese-simplified-400-normal.woff2`` (7,946 code points, 7,333 of them ideographs, which
cover the Simplified and the common Traditional characters of the sources), committed under ``tools/fonts/`` with
its licence, so that a build needs no network. ``fetch`` re-creates that file and checks its SHA-256.

Every HTML build (``tools/book_site.py``, at the end of the build) calls :func:`subset_site`: it collects the CJK
characters of every page of *that* build (the English book, the student edition, a Chinese edition alike) and
writes a subset of the source font with exactly those characters, about 1 kB per character in WOFF2. A character
missing from the source font fails the build; ``tests/test_site_tools.py`` checks the sources (notebooks, pages,
the errata catalogue, translation catalogues under ``locale/``) against the source font before any build, and the
site test checks that the served font has every CJK character of the pages it opens.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FONT_DIR = ROOT / "tools" / "fonts"
SOURCE_FONT = FONT_DIR / "noto-sans-sc-chinese-simplified-400-normal.woff2"
SOURCE_LICENSE = FONT_DIR / "OFL.txt"
NPM_PACKAGE = "@fontsource/noto-sans-sc@5.3.0"
NPM_FILE = "package/files/noto-sans-sc-chinese-simplified-400-normal.woff2"
SOURCE_SHA256 = "95e3633b6a98f764ba3adfb54504a0cd4799328c009adf9081d6c1850f9c4c78"
FAMILY = "Course CJK"
SERVED = Path("_static") / "fonts" / "course-cjk.woff2"
SERVED_LICENSE = Path("_static") / "fonts" / "OFL.txt"

# Han ideographs (with extensions and compatibility forms), CJK symbols and punctuation, Bopomofo, Kana, CJK
# strokes and radicals, vertical and small forms, full-width forms.
CJK_RANGES = (
    (0x2E80, 0x2FDF), (0x2FF0, 0x303F), (0x3040, 0x30FF), (0x3100, 0x312F), (0x31A0, 0x31EF), (0x3200, 0x32FF),
    (0x3300, 0x33FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFE10, 0xFE1F), (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF), (0x20000, 0x2FA1F),
)
CJK_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in CJK_RANGES)
CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
# The same class for JavaScript regular expressions (flag u).
CJK_CLASS_JS = "[" + "".join(f"\\u{{{a:x}}}-\\u{{{b:x}}}" for a, b in CJK_RANGES) + "]"
# A run of Chinese text: CJK characters, with spaces, digits and punctuation between them.
CJK_RUN = re.compile(f"[{CJK_CLASS}]+(?:[\\s\\d.,;:!?()\\[\\]“”‘’—…·/+=×-]*[{CJK_CLASS}]+)*")


def is_cjk(char: str) -> bool:
    return CJK_CHAR.fullmatch(char) is not None


def cjk_chars(text: str) -> set[str]:
    """The CJK characters of ``text``."""
    return set(CJK_CHAR.findall(text))


def chars_in_files(paths: list[Path]) -> set[str]:
    """The CJK characters of every file under ``paths`` (files or folders; text files of the usual kinds)."""
    found: set[str] = set()
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in
                                                    (".html", ".ipynb", ".md", ".yml", ".yaml", ".po", ".txt", ".js"))
        for file in files:
            if "mathjax" in file.parts or "fonts" in file.parts:
                continue
            found |= cjk_chars(file.read_text(encoding="utf-8", errors="replace"))
    return found


def font_chars(font_path: Path) -> set[str]:
    from fontTools.ttLib import TTFont

    return {chr(code) for code in TTFont(font_path).getBestCmap()}


def missing_from_source(chars: set[str]) -> list[str]:
    return sorted(chars - font_chars(SOURCE_FONT))


def unicode_range(chars: set[str]) -> str:
    """A CSS ``unicode-range`` value covering exactly ``chars`` (consecutive code points merged)."""
    codes = sorted(ord(c) for c in chars)
    ranges: list[tuple[int, int]] = []
    for code in codes:
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in ranges)


def subset(chars: set[str], target: Path) -> None:
    """Write a WOFF2 subset of the source font with exactly ``chars`` (ValueError if some are missing)."""
    from fontTools import subset as ft_subset

    missing = missing_from_source(chars)
    if missing:
        raise ValueError(f"{len(missing)} CJK character(s) are not in {SOURCE_FONT.name}: {''.join(missing)}")
    options = ft_subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    options.notdef_outline = True
    font = ft_subset.load_font(str(SOURCE_FONT), options)
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    target.parent.mkdir(parents=True, exist_ok=True)
    ft_subset.save_font(font, str(target), options)


def site_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts) + \
        sorted(site.glob("searchindex.js"))


def subset_site(site: Path) -> tuple[set[str], str]:
    """Subset the font to the CJK characters of the built site; returns (characters, CSS unicode-range)."""
    chars = chars_in_files(site_pages(site))
    target = site / SERVED
    if chars:
        subset(chars, target)
        shutil.copy2(SOURCE_LICENSE, site / SERVED_LICENSE)
    elif target.exists():
        target.unlink()
    return chars, unicode_range(chars) if chars else ""


# Punctuation that Chinese text shares with English text, in General Punctuation (outside CJK_RANGES): quotation
# marks, the dash of "——" and the ellipsis of "……". The CJK subset does not hold them, so a Chinese page drew them
# with the Latin font: narrow quotation marks, a short dash (issue 36, S4). The source font draws them full width
# (advance 1 em; the em dash 0.89 em). They are served as a second family, PUNCT_FAMILY, which the Chinese text
# rules put first (tools/book_site.py): Chinese text gets these glyphs, English text keeps its own quotation marks.
PUNCT = "\u2014\u2018\u2019\u201c\u201d\u2026"  # — ‘ ’ “ ” …
PUNCT_FAMILY = "Course CJK Punctuation"
PUNCT_SERVED = Path("_static") / "fonts" / "course-cjk-punct.woff2"


def subset_punctuation(site: Path) -> str:
    """Write the punctuation subset into the site; returns its CSS unicode-range."""
    subset(set(PUNCT), site / PUNCT_SERVED)
    return unicode_range(set(PUNCT))


def fetch() -> None:
    """Re-create tools/fonts/ from the npm package (needs npm and the registry)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", NPM_PACKAGE, "--pack-destination", tmp], check=True, stdout=subprocess.DEVNULL)
        tarball = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tarball) as tar:
            data = tar.extractfile(NPM_FILE).read()
            license_text = tar.extractfile("package/LICENSE").read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{NPM_FILE} has SHA-256 {digest}, expected {SOURCE_SHA256}")
    FONT_DIR.mkdir(parents=True, exist_ok=True)
    SOURCE_FONT.write_bytes(data)
    SOURCE_LICENSE.write_bytes(license_text)
    print(f"wrote {SOURCE_FONT.relative_to(ROOT)} and {SOURCE_LICENSE.relative_to(ROOT)}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    command, rest = argv[0], [Path(p) for p in argv[1:]]
    if command == "chars":
        print("".join(sorted(chars_in_files(rest))))
        return 0
    if command == "check":
        chars = chars_in_files(rest)
        missing = missing_from_source(chars)
        print(f"{len(chars)} CJK characters, {len(missing)} missing from {SOURCE_FONT.name}{': ' if missing else ''}"
              f"{''.join(missing)}")
        return 1 if missing else 0
    if command == "subset" and len(rest) == 1:
        chars, _ = subset_site(rest[0])
        print(f"{rest[0] / SERVED}: {len(chars)} CJK characters")
        return 0
    if command == "fetch":
        fetch()
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Sphinx extension of the Chinese edition: citations that read as Chinese (issue 36).

Loaded by the Chinese edition only (tools/zh_edition.py adds it to the generated configuration, which sets
``bibtex_foot_reference_style`` to :data:`STYLE`). A textual citation, ``{footcite:t}`vaswani2017attention```,
reads "Vaswani *et al.* [1]" in the English edition; in a Chinese sentence that is English. Here it reads:

* three or more authors: the first author and 等, "Vaswani 等[1]" (the form of Chinese academic writing, GB/T 7714),
  and for an author with a Chinese name, the name as Chinese readers write it, without a space: "苏剑林等[3]";
* two authors: "Shaw 和 Uszkoreit"; one author: the name.

An author's Chinese name comes from the entry's ``author_zh`` field in references.bib (the same persons in the same
order as ``author``, each one written as the Chinese edition cites it: a Chinese name only where it is verified,
otherwise the name as published). Entries in Chinese (``langid = {chinese}``) are the Chinese primary literature
(苏剑林's posts on 科学空间, the Chinese edition of Dive into Deep Learning): a Chinese message may cite them where
its English has no citation (tests/test_zh_edition.py allows exactly those keys; zh_edition.CHINESE_LITERATURE).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pybtex.richtext import Text
from pybtex.style.template import FieldIsMissing, _format_list, first_of, node, optional, tag
from pybtex.style.template import field as bib_field

STYLE = "foot_zh"
OTHERS = "等"  # three or more authors: the first, then 等
AND = " 和 "  # two authors


def _is_cjk(char: str) -> bool:
    return "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"


def _persons(data, role: str):
    """The persons of ``role``; for authors, the Chinese edition's forms (``author_zh``) when the entry has them."""
    from pybtex.database import Person

    entry = data["entry"]
    if role == "author" and "author_zh" in entry.fields:
        return [Person(name) for name in entry.fields["author_zh"].split(" and ")]
    try:
        return entry.persons[role]
    except KeyError:
        raise FieldIsMissing(role, entry)


@node
def zh_names(children, data, role: str, full: bool = False):
    """The persons of ``role`` as a Chinese sentence names them (see the module's docstring)."""
    assert not children
    style = data["style"]
    people = _persons(data, role)
    parts = [p for p in _format_list([style.person.style_plugin.format(p, style.person.abbreviate) for p in people],
                                     data) if p]
    if not parts:
        return Text()
    if len(parts) == 1:
        return Text(parts[0])
    if len(parts) == 2:
        return Text(parts[0], AND, parts[1])
    if full:
        return Text("、").join(parts[:-1]) + Text(AND, parts[-1])
    first = parts[0]
    return Text(first, OTHERS if _is_cjk(str(first)[-1:]) else " " + OTHERS)


@node
def zh_author_or_editor_or_title(children, data, full: bool = False):
    assert not children
    return first_of[
        optional[zh_names("author", full=full)],
        optional[zh_names("editor", full=full)],
        tag("em")[bib_field("title")],
    ].format_data(data)


def _person_style_class():
    from sphinxcontrib.bibtex.style.referencing import PersonStyle

    @dataclass
    class ChinesePersonStyle(PersonStyle):
        """Names in Chinese sentences: "Vaswani 等", "苏剑林等", "Shaw 和 Uszkoreit"."""

        def names(self, role: str, full: bool):
            return zh_names(role=role, full=full)

        def author_or_editor_or_title(self, full: bool):
            return zh_author_or_editor_or_title(full=full)

    return ChinesePersonStyle


def style_class():
    """The footnote reference style of the Chinese edition (sphinxcontrib-bibtex's foot style, Chinese names)."""
    from sphinxcontrib.bibtex.style.referencing.foot import FootReferenceStyle

    person_style = _person_style_class()

    @dataclass
    class ChineseFootReferenceStyle(FootReferenceStyle):
        person: "PersonStyle" = field(default_factory=person_style)  # noqa: F821 - dataclass annotation only

    return ChineseFootReferenceStyle


def setup(app) -> dict:
    from sphinxcontrib.bibtex.plugin import register_plugin

    register_plugin("sphinxcontrib.bibtex.style.referencing", STYLE, style_class(), force=True)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""HCL files as a tree of blocks and attributes, each with its line, from the `hcl2` parser.

`hcl2.loads` (checkov's bc-python-hcl2) returns dicts in which `x {}` (a block) and `x = {}`
(a map attribute) look the same, and only top-level blocks carry a line. The schema check
needs both distinctions, so this module walks the Lark parse tree that `hcl2.loads` builds
its dicts from (same grammar, same parser instance) and keeps the syntax: a block is
`identifier labels* { body }`, an attribute is `identifier = expression`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hcl2.parser import Hcl2
from lark import Token, Tree


class HclSyntaxError(Exception):
    """A file does not parse as HCL (the message names the file)."""


@dataclass(frozen=True)
class Attribute:
    name: str
    line: int
    # "tuple", "object", "string", "number", "bool" for a literal; "expression" otherwise.
    literal: str
    source: str  # the expression as written, e.g. `google-beta.west` for `provider`


@dataclass
class Block:
    type: str
    labels: tuple[str, ...]
    line: int
    attributes: dict[str, Attribute] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)

    def nested(self, block_type: str) -> list[Block]:
        return [b for b in self.blocks if b.type == block_type]


def _identifier(tree: Tree[Token]) -> str:
    return str(tree.children[0])


def _label(node: Tree[Token] | Token) -> str:
    if isinstance(node, Token):  # STRING_LIT, quoted
        return str(node)[1:-1]
    return _identifier(node)


def _literal(expression: Tree[Token] | Token) -> str:
    node = expression
    # `expr_term` wraps one term; anything else (operation, conditional, call) is an expression.
    if isinstance(node, Tree) and node.data == "expr_term" and len(node.children) == 1:
        node = node.children[0]
    else:
        return "expression"
    if isinstance(node, Token):
        return "string" if node.type == "STRING_LIT" and "${" not in node else "expression"
    kinds = {"tuple": "tuple", "object": "object", "int_lit": "number", "float_lit": "number"}
    if node.data in kinds:
        return kinds[node.data]
    if node.data == "identifier" and _identifier(node) in ("true", "false"):
        return "bool"
    return "expression"


def _source(text: str, node: Tree[Token] | Token) -> str:
    if isinstance(node, Token):
        return str(node)
    return text[node.meta.start_pos : node.meta.end_pos].strip()


def _body(block: Block, body: Tree[Token], text: str) -> Block:
    for child in body.children:
        if not isinstance(child, Tree):
            continue
        line = child.meta.line
        if child.data == "attribute":
            name_tree, expression = child.children[0], child.children[1]
            assert isinstance(name_tree, Tree)
            name = _identifier(name_tree)
            source = _source(text, expression)
            block.attributes[name] = Attribute(name, line, _literal(expression), source)
        elif child.data == "block":
            head, inner = child.children[:-1], child.children[-1]
            assert isinstance(head[0], Tree) and isinstance(inner, Tree)
            nested = Block(_identifier(head[0]), tuple(_label(h) for h in head[1:]), line)
            block.blocks.append(_body(nested, inner, text))
    return block


def parse(text: str, filename: str) -> Block:
    """The whole file as a root block (type "") whose `blocks` are the top-level blocks."""
    try:
        text += "\n"
        tree = Hcl2.lark_parser.parse(text)
    except Exception as exc:  # Lark raises several unrelated exception classes
        raise HclSyntaxError(f"{filename} does not parse as HCL: {exc}") from exc
    body = tree.children[0] if tree.data == "start" else tree
    if not isinstance(body, Tree) or body.data != "body":
        raise HclSyntaxError(f"{filename}: unexpected parse tree root {tree.data!r}")
    return _body(Block("", (), 1), body, text)

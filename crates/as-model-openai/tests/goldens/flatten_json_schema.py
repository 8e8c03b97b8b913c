# Made with AgentScope 2.0.4 (pip install agentscope==2.0.4):
#   python flatten_json_schema.py > flatten-json-schema.json
# Each case: the tool `parameters` schema and the exact bytes 2.0.4's `_flatten_json_schema` (what
# `OpenAIChatModel` sends) gives for it, serialized compactly (json.dumps with separators (",", ":")).
import json, logging
from typing import Optional
from pydantic import BaseModel
from agentscope._utils._common import _flatten_json_schema

logging.disable(logging.CRITICAL)  # the "Circular reference detected" warnings


class Node(BaseModel):
    value: int
    left: Optional["Node"] = None
    right: Optional["Node"] = None


class Trio(BaseModel):
    value: int
    a: Optional["Trio"] = None
    b: Optional["Trio"] = None
    c: Optional["Trio"] = None


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    home: Address
    work: Optional[Address] = None


class Params(BaseModel):
    root: Node


class Family(BaseModel):
    members: list[Person]


cases = {
    # Node has two optional children that are Nodes (Pydantic's own schema).
    "recursive_tree": Params.model_json_schema(),
    # Three self-references.
    "recursive_three_children": Trio.model_json_schema(),
    # A -> B -> A.
    "mutual_recursion": {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "n": {"type": "integer"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A", "description": "back to A"}}},
        },
    },
    # Both sections: the maps are merged (`definitions` wins a name both have).
    "defs_and_definitions": {
        "type": "object",
        "properties": {
            "x": {"$ref": "#/$defs/A"},
            "y": {"$ref": "#/definitions/B"},
            "z": {"$ref": "#/definitions/Shared"},
            "w": {"$ref": "#/$defs/Shared"},
        },
        "$defs": {"A": {"type": "string"}, "Shared": {"type": "string", "title": "from $defs"}},
        "definitions": {"B": {"type": "integer"}, "Shared": {"type": "number", "title": "from definitions"}},
    },
    # Only the legacy section.
    "definitions_only": {
        "type": "object",
        "properties": {"p": {"$ref": "#/definitions/P"}},
        "definitions": {"P": {"type": "boolean"}},
    },
    # Nested, non-recursive, with keys next to the $ref (they are added after the definition's own).
    "nested_non_recursive": Family.model_json_schema(),
    "sibling_keys_override": {
        "type": "object",
        "properties": {"p": {"description": "first", "$ref": "#/$defs/P", "title": "Override"}},
        "$defs": {"P": {"title": "P", "type": "object", "properties": {"q": {"$ref": "#/$defs/Q"}}},
                  "Q": {"type": "string", "description": "a q"}},
    },
    # Refs inside anyOf, items, additionalProperties, oneOf, allOf, prefixItems, not.
    "refs_in_combinators": {
        "type": "object",
        "properties": {
            "any": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]},
            "list": {"type": "array", "items": {"$ref": "#/$defs/S"}},
            "map": {"type": "object", "additionalProperties": {"$ref": "#/$defs/S"}},
            "one": {"oneOf": [{"$ref": "#/$defs/S"}, {"$ref": "#/$defs/T"}]},
            "all": {"allOf": [{"$ref": "#/$defs/T"}]},
            "tuple": {"type": "array", "prefixItems": [{"$ref": "#/$defs/S"}, {"$ref": "#/$defs/T"}]},
            "not": {"not": {"$ref": "#/$defs/T"}},
        },
        "$defs": {"S": {"type": "string", "maxLength": 8}, "T": {"type": "integer", "minimum": 0}},
    },
    # A ref to a definition that does not exist, and a remote ref: left as they are (not walked).
    "unresolved_refs": {
        "type": "object",
        "properties": {
            "missing": {"$ref": "#/$defs/Missing", "description": "kept", "items": {"$ref": "#/$defs/S"}},
            "remote": {"$ref": "https://example.com/schema.json"},
            "ok": {"$ref": "#/$defs/S"},
        },
        "$defs": {"S": {"type": "string"}},
    },
    # Only the last path segment names the definition.
    "deep_ref_path": {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/group/S"}},
        "$defs": {"S": {"type": "string"}},
    },
    # The root itself is a ref.
    "root_ref": {"$ref": "#/$defs/R", "description": "root", "$defs": {"R": {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}}}}},
    # Nested $defs/definitions sections are dropped (not merged).
    "nested_sections_dropped": {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/P"}, "q": {"type": "object", "$defs": {"Z": {"type": "null"}}, "definitions": {}}},
        "$defs": {"P": {"type": "object", "$defs": {"Inner": {"type": "string"}}}},
    },
    # An empty section: removed, nothing else touched.
    "empty_defs": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P", "$defs": {"X": {}}}}, "$defs": {}},
    # No section: sent as it is.
    "no_defs": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}},
    # A section that is not an object is not a section.
    "defs_not_an_object": {"type": "object", "properties": {"p": {"type": "string"}}, "$defs": ["x"]},
    "defs_not_an_object_with_definitions": {
        "type": "object",
        "properties": {"p": {"$ref": "#/definitions/P"}},
        "$defs": "junk",
        "definitions": {"P": {"type": "string"}},
    },
    # A ref whose value is not a string: the object is left as it is.
    "ref_not_a_string": {
        "type": "object",
        "properties": {"p": {"$ref": 5, "x": {"$ref": "#/$defs/P"}}, "q": {"$ref": "#/$defs/P"}},
        "$defs": {"P": {"type": "string"}},
    },
}

out = []
for name, schema in cases.items():
    flat = _flatten_json_schema(schema)
    out.append({"name": name, "schema": schema, "flattened": json.dumps(flat, separators=(",", ":"))})
print(json.dumps(out, indent=2))

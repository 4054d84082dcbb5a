#!/usr/bin/env python3
"""Every installed declaration is either exported or needs no symbol.

Parses the installed headers (INCLUDE_DIR/neardup/*.h) with clang's JSON AST and lists each
declaration a consumer links against: functions, methods, constructors, destructors and
variables that are not inline, constexpr, templates, defaulted, deleted or pure virtual. Each must
carry NEARDUP_EXPORT (its own or its class's), and a symbol of that name must be exported by one of
the LIBRARIES (nm -DC --defined-only). Exits 1 listing those that are not; 0 (saying so) when no
clang++ is installed.

Usage: check_exports.py INCLUDE_DIR LIBRARY...
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FUNCTIONS = {"FunctionDecl", "CXXMethodDecl", "CXXConstructorDecl", "CXXDestructorDecl",
             "CXXConversionDecl"}


def ast_objects(include_dir, compiler):
    headers = sorted(glob.glob(os.path.join(include_dir, "neardup", "*.h")))
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as tu:
        for header in headers:
            tu.write(f'#include "neardup/{os.path.basename(header)}"\n')
    try:
        dump = subprocess.run(
            [compiler, "-std=c++20", "-fsyntax-only", "-I", include_dir, "-Xclang",
             "-ast-dump=json", "-Xclang", "-ast-dump-filter=neardup", tu.name],
            check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(tu.name)
    decoder, objects, at = json.JSONDecoder(), [], 0
    while True:  # one JSON object per top-level declaration the filter matched
        while at < len(dump) and dump[at].isspace():
            at += 1
        if at >= len(dump):
            return objects
        obj, at = decoder.raw_decode(dump, at)
        objects.append(obj)


def annotate(objects):
    """Gives each node its file: clang's JSON names a file only where it differs from the last
    location written, in document order (spelling, then expansion location)."""
    last = [None]

    def see(loc):
        for part in (loc, loc.get("spellingLoc", {}), loc.get("expansionLoc", {})):
            if "file" in part:
                last[0] = part["file"]

    def walk(node):
        loc = node.get("loc", {})
        see(loc)
        node["_file"] = loc.get("expansionLoc", {}).get("file", last[0])
        node["_hidden"] = False
        for end in ("begin", "end"):
            see(node.get("range", {}).get(end, {}))
        for child in node.get("inner", []) or []:
            walk(child)

    for obj in objects:
        walk(obj)


def visibility(node, export_lines, hidden_lines):
    """"default" or "hidden" when the node carries NEARDUP_EXPORT or NEARDUP_HIDDEN."""
    for child in node.get("inner", []) or []:
        if child.get("kind") == "VisibilityAttr":
            line = child.get("range", {}).get("begin", {}).get("spellingLoc", {}).get("line")
            return "hidden" if line in hidden_lines else "default"
    return None


def needs_symbol(node, kind):
    inner = node.get("inner", []) or []
    if node.get("isImplicit") or any(c.get("kind") == "CompoundStmt" for c in inner):
        return False  # compiler-made, or defined in the header
    for flag in ("inline", "constexpr", "explicitlyDefaulted", "explicitlyDeleted", "pure"):
        if node.get(flag):
            return False
    if kind == "VarDecl" and node.get("storageClass") not in ("extern", "static"):
        return False  # a const namespace-scope variable (internal linkage) or a parameter
    return True


def declarations(objects, include_dir, export_lines, hidden_lines):
    """(header, qualified name, exported) of each declaration that needs a symbol."""
    found = []
    root = os.path.realpath(include_dir) + os.sep

    def walk(node, scope, exported, template):
        kind = node.get("kind")
        name = node.get("name", "")
        mark = visibility(node, export_lines, hidden_lines)
        if kind == "NamespaceDecl":
            if not name:
                return  # internal linkage
            for child in node.get("inner", []) or []:
                walk(child, scope + [name], exported, template)
        elif kind in ("CXXRecordDecl", "ClassTemplateDecl", "ClassTemplatePartialSpecializationDecl"):
            inner_exported = mark == "default" or (exported and mark != "hidden")
            for child in node.get("inner", []) or []:
                walk(child, scope + ([name] if name else []), inner_exported,
                     template or kind != "CXXRecordDecl")
        elif kind in ("FriendDecl", "LinkageSpecDecl"):
            for child in node.get("inner", []) or []:
                walk(child, scope, exported, template)
        elif kind in FUNCTIONS or kind == "VarDecl":
            path = os.path.realpath(node.get("_file") or "")
            if template or not path.startswith(root) or not needs_symbol(node, kind):
                return
            found.append((os.path.relpath(path, root), "::".join(scope + [name]),
                          mark == "default" or (exported and mark != "hidden")))

    for obj in objects:
        walk(obj, [], False, False)
    return sorted(set(found))


def exported_names(libraries):
    names = set()
    for library in libraries:
        listing = subprocess.run(["nm", "-DC", "--defined-only", library], check=True,
                                 capture_output=True, text=True).stdout
        for line in listing.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3:
                names.add(re.sub(r"\[abi:\w+\]", "", parts[2].split("(", 1)[0]))
    return names


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    include_dir, libraries = sys.argv[1], sys.argv[2:]
    compiler = shutil.which("clang++-14") or shutil.which("clang++")
    if compiler is None:
        print("exports: skipped: no clang++ to parse the installed headers")
        return 0
    export_h = os.path.join(include_dir, "neardup", "export.h")
    with open(export_h, encoding="utf-8") as f:
        lines = f.read().splitlines()
    export_lines = {i + 1 for i, l in enumerate(lines) if l.startswith("#define NEARDUP_EXPORT [[")}
    hidden_lines = {i + 1 for i, l in enumerate(lines) if l.startswith("#define NEARDUP_HIDDEN [[")}
    objects = ast_objects(include_dir, compiler)
    annotate(objects)
    found = declarations(objects, include_dir, export_lines, hidden_lines)
    names = exported_names(libraries)
    problems = []
    for header, name, marked in found:
        if not marked:
            problems.append(f"{header}: {name} is declared without NEARDUP_EXPORT")
        elif name not in names:
            problems.append(f"{header}: {name} is exported by no library (declared, never defined?)")
    for problem in problems:
        print("exports: " + problem, file=sys.stderr)
    if problems:
        return 1
    print(f"exports: all {len(found)} declarations of the installed headers that need a symbol "
          "carry NEARDUP_EXPORT and are exported")
    return 0


if __name__ == "__main__":
    sys.exit(main())

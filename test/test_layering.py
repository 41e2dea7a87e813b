# SPDX-License-Identifier: BSD-3-Clause
"""The package's import graph, from its own import statements (function-level and TYPE_CHECKING
imports included): no cycle, and no lower layer importing a higher one."""
import ast
import pathlib

import sva_linearizer

PACKAGE = pathlib.Path(sva_linearizer.__file__).parent

# layer -> the layers it must not import (a layer: a module or a folder of the package)
FORBIDDEN = {
    "_jit": ("algorithms", "linearization", "warmup", "tools", "ros", "model", "data", "layout", "state"),
    "_cache": ("algorithms", "linearization", "warmup", "tools", "ros", "_jit"),
    "_plain": ("algorithms", "linearization", "warmup", "tools", "ros"),
    "spatial": ("algorithms", "linearization", "warmup", "tools", "ros", "model", "data", "state"),
    "spatial_ops": ("algorithms", "linearization", "warmup", "tools", "ros", "model", "data", "state"),
    "joints": ("algorithms", "linearization", "warmup", "tools", "ros", "model", "data"),
    "model": ("algorithms", "linearization", "warmup", "tools", "ros", "data", "urdf"),
    "layout": ("algorithms", "linearization", "warmup", "tools", "ros", "model", "data"),
    "topology": ("algorithms", "linearization", "warmup", "tools", "ros", "data"),
    "data": ("algorithms", "linearization", "warmup", "tools", "ros"),
    "state": ("algorithms", "linearization", "warmup", "tools", "ros"),
    "coupling": ("algorithms", "linearization", "warmup", "tools", "ros", "data", "urdf"),
    "algorithms": ("linearization", "warmup", "tools", "ros", "urdf", "robots", "cli"),
    "linearization": ("warmup", "tools", "ros", "cli"),
}

# the parts of ros/, bottom up: each imports only itself and the parts before it (ros/cli.py, on top,
# imports any; a part never imports ros/__init__.py, the public names' face)
ROS_PARTS = ("wire", "node", "bag", "transports", "client", "demo")


def _modules():
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = ("sva_linearizer",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name, path, modules):
    """The package modules that module `name` imports (each resolved to the longest module name)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph():
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    """The reader finds the package's known edges (a reader that found none would pass the rest)."""
    g = _graph()
    assert "sva_linearizer.algorithms.kinematics" in g["sva_linearizer.algorithms.eidamb"]
    assert "sva_linearizer.layout" in g["sva_linearizer.algorithms.eidamb"]
    assert "sva_linearizer.algorithms.constrained_dynamics" in g["sva_linearizer.linearization.with_contacts"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_lower_layers_do_not_import_higher_ones():
    bad = []
    for name, deps in _graph().items():
        layer = name.split(".")[1] if "." in name else ""
        for dep in deps:
            target = dep.split(".")[1] if "." in dep else ""
            if target in FORBIDDEN.get(layer, ()):
                bad.append(f"{name} imports {dep}")
    assert bad == []


def test_ros_parts_import_only_the_parts_below():
    bad = []
    for name, deps in _graph().items():
        parts = name.split(".")
        if parts[:2] != ["sva_linearizer", "ros"] or len(parts) < 3 or parts[2] not in ROS_PARTS:
            continue
        allowed = ROS_PARTS[:ROS_PARTS.index(parts[2]) + 1]
        for dep in deps:
            d = dep.split(".")
            if d[:2] == ["sva_linearizer", "ros"] and (len(d) < 3 or d[2] not in allowed):
                bad.append(f"{name} imports {dep}")
    assert bad == []

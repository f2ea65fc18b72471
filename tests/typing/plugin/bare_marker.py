from treespec import Static

MyStatic = Static  # E: treespec-bare-marker


def f(x: Static) -> None: ...  # E: treespec-bare-marker

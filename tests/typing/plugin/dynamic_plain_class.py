from treespec import Dynamic


class Tokenizer:
    vocab: dict[str, int]


def f(t: Dynamic[Tokenizer]) -> None: ...  # E: treespec-non-array-dynamic

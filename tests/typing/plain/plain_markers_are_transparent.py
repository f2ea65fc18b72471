from treespec import Donate, Dynamic, Static

a: Static[int] = 3
b: Dynamic[float] = 1.0
c: Donate[list[int]] = [1]
reveal_type(a)  # N: Revealed type is "int"
reveal_type(b)  # N: Revealed type is "float"
reveal_type(c)  # N: Revealed type is "list[int]"
d: Static[int] = "three"  # E: assignment

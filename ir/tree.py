"""Placeholder: being written (rich trees)."""


def format_tree(node, **options):
    raise NotImplementedError("format_tree under construction")

"""Shared text helpers, the bottom layer every package may use: token estimates (`tokens`),
which script a text is written in (`script`), folding and tokenizing (`fold`), and the
customer's language (`language`). Nothing here imports from the rest of `app`.
"""

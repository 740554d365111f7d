# A plain Catalyst script that does nothing with the data: what remains is the cost of a
# Catalyst call itself (staging, wrapping the arrays, handing them to Python and back).


def catalyst_execute(info):
    pass

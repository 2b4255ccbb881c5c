"""What several test modules share: inputs drawn by hypothesis, kernel families described for
the conformance checks, tiny specs and corpora, checks of run folders. Imported by name
(`from tests.helpers.families import MLSTM`).
"""

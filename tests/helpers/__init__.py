"""What several test modules share: inputs drawn by hypothesis, the kernel backends the
conformance checks run, tiny specs and corpora, checks of run folders. Imported by name
(`from tests.helpers.kernel_backends import BACKENDS`).
"""

"""What a user's test file needs to run both suites over a mixer and a kernel of their own: the
three lines below (tests/helpers' toy mixer and kernel stand for theirs)."""

from layerzoo.testing import kernel_test, mixer_test

from tests.helpers import toy_kernel, toy_mixer

test_the_toy_mixer = mixer_test(toy_mixer.ToyMixer, reference=toy_mixer.toy_dense)
test_the_toy_kernel = kernel_test(toy_kernel.toy_family(), "chunkwise")

# Checks of the Makefiles themselves (scripts/check_make.sh).
## make make-check    make help lists each target once in one column, make demo says it builds
##                    before compiling, set-up modes (the demo installs no browsers), make test
##                    runs every step after a failing one and ends with the table of steps
.PHONY: make-check print-test-env
TEST_TARGETS += make-check
make-check:
	@scripts/check_make.sh
# What cargo sees from make (for make-check).
print-test-env:
	@env | grep -E '^(CARGO_TERM_COLOR|CARGO_TERM_QUIET|NO_COLOR)=' | sort

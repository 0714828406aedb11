# The repository stands alone (scripts/check_docs.sh).
## make docs-check    tracked files name no issue numbers and no internal notes folders
.PHONY: docs-check
TEST_TARGETS += docs-check
docs-check:
	@scripts/check_docs.sh

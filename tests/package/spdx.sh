#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file of the checkout carries the SPDX line of recap's licence in its first lines,
# and LICENSE holds the licence text. Needs git's file list: a tarball (make distcheck, the GPU
# machine) has no git metadata, so there the test is skipped (exit 77).
cd "${srcdir:-.}" || exit 99
git ls-files --error-unmatch configure.ac >/dev/null 2>&1 || {
    echo "spdx: not a git checkout, skipped"
    exit 77
}
grep -q '^ *Apache License$' LICENSE && grep -q 'Version 2.0, January 2004' LICENSE || {
    echo "spdx: LICENSE is not the Apache-2.0 text"
    exit 1
}
# Every file but documentation, images, data and git's own: a new kind of source is checked
# without anyone remembering to add it here.
missing=$(git ls-files |
    grep -vE '\.(md|png)$|(^|/)\.gitignore$|^tests/fuzz/corpus/|^LICENSE$|^configure~$' |
    while read -r f; do
        head -3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$f"
    done)
if [ -n "$missing" ]; then
    echo "spdx: no 'SPDX-License-Identifier: Apache-2.0' line in:"
    echo "$missing"
    exit 1
fi
echo "spdx: $(git ls-files | wc -l) files checked"

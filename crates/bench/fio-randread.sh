#!/bin/sh
# The physical limit of the disk that holds a benchmark's databases: fio's 4 KiB random-read
# test (O_DIRECT, io_uring) at queue depth 32 and at queue depth 1, on a test file in DIR.
#
# Usage: fio-randread.sh DIR [FILE_SIZE] [SECONDS]
#   DIR        a directory on the disk to measure (the benchmark's --dir)
#   FILE_SIZE  the test file's size, default 4G (larger than any cache in front of the disk)
#   SECONDS    run time of each test, default 20
# Prints `iops_qd32=N` and `iops_qd1=N` (what `sprig-bench compare --fio` reads), and
# removes the test file.
#
# Needs fio: `apt-get install -y fio` (Debian/Ubuntu) or `dnf install fio`.
set -eu
dir=${1:?usage: fio-randread.sh DIR [FILE_SIZE] [SECONDS]}
size=${2:-4G}
secs=${3:-20}
command -v fio >/dev/null 2>&1 || {
	echo "fio is not installed: apt-get install -y fio" >&2
	exit 2
}
file="$dir/fio-randread.test"
trap 'rm -f "$file"' EXIT INT TERM
iops() {
	fio --name=randread --filename="$file" --size="$size" --rw=randread --bs=4k \
		--direct=1 --ioengine=io_uring --iodepth="$1" --numjobs=1 --time_based \
		--runtime="$secs" --group_reporting --output-format=terse --terse-version=3 |
		awk -F';' '{ print $8 }'
}
echo "iops_qd32=$(iops 32)"
echo "iops_qd1=$(iops 1)"

// SPDX-License-Identifier: MIT
/*
 * pin_st_load: the one entry that loads a checkpoint, above the two ways
 * there are: a model.safetensors.index.json names the files to load one
 * by one (safetensors_index.c), any other path is one file
 * (safetensors_load.c).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "io/io_internal.h"
#include "safetensors_ck.h"

int pin_st_load(struct pin_st *ck, struct pin_dev *dev, const char *path,
		const struct pin_st_load_opts *opts)
{
	struct st_progress prog = { 0 };
	struct pin_st_load_opts lo;
	struct pin_io_opts o;
	unsigned flags;
	struct stat sb;
	int ret, node;

	if (ck->n || ck->nfiles)
		return pin__st_fail(ck, -EBUSY, "checkpoint is not empty");
	ret = pin__st_load_opts(ck, opts, &lo, &node, &flags);
	if (ret)
		return ret;
	ck->node = node;
	ck->node_flags = flags;
	ck->load_flags = lo.flags;
	ck->err[0] = 0;		/* no earlier failure's text after a success */
	memset(&ck->stats, 0, sizeof(ck->stats));
	memset(&ck->phases, 0, sizeof(ck->phases));
	ck->nsteps = 0;
	ret = pin__io_opts(lo.io, &o, &ck->stats);
	if (ret)
		return pin__st_fail(ck, ret, "%s", ck->stats.error);
	prog.user = &o;
	if (pin__st_is_index(path)) {
		ret = pin__st_load_index(ck, dev, path, &o, &prog);
	} else {
		if (stat(path, &sb) == 0)
			prog.total = (uint64_t)sb.st_size + PIN_IO_ALIGN;
		ret = pin__st_add_file(ck, path);
		if (!ret)
			ret = pin__st_load_file(ck, dev, 0, &o, &prog);
		if (!ret)
			ret = pin__st_build_index(ck);
		else if (ret == -ENOMEM && !ck->err[0])
			pin__st_fail(ck, ret, "out of memory");
	}
	if (ret)
		pin__st_clear(ck);
	else if (o.progress)
		o.progress(o.progress_arg, prog.base, prog.base);
	return ret;
}

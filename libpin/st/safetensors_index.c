// SPDX-License-Identifier: MIT
/*
 * Sharded checkpoints: an index file (*.index.json) whose weight_map names
 * the shard of each tensor. Each shard is loaded, and the map is held to
 * what the shards hold: every entry in the file it names, nothing more.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "safetensors_internal.h"
#include "safetensors_ck.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read a whole small file (an index) into a NUL-terminated buffer. */
static int slurp(struct pin_st *ck, const char *path, char **out,
		 size_t *outlen)
{
	struct stat sb;
	size_t got = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return pin__st_fail(ck, -errno, "%s: open: %s", path,
				    strerror(errno));
	if (fstat(fd, &sb) < 0 || sb.st_size > (off_t)PIN_ST_MAX_HEADER) {
		close(fd);
		return pin__st_fail(ck, -EINVAL, "%s: unreadable or over %llu bytes",
				    path, PIN_ST_MAX_HEADER);
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		close(fd);
		return pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int err = r < 0 ? -errno : -EIO;

			free(buf);
			close(fd);
			return pin__st_fail(ck, err, "%s: read at offset %zu: %s",
					    path, got,
					    r < 0 ? strerror(-err) : "file shrank");
		}
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	*outlen = got;
	return 0;
}

/* The shards the weight map names, each once, sorted, into ck->files. */
static int add_shards(struct pin_st *ck, const char *path,
		      const struct pin__jval *wm)
{
	char *dir = strdup(path), **names = malloc((wm->n + 1) * sizeof(char *));
	size_t i, nn = 0;
	int ret = 0;

	if (!names || !dir) {
		ret = pin__st_fail(ck, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	for (i = 0; i < wm->n; i++) {
		const char *fname = wm->items[i]->s;

		if (wm->items[i]->type != PIN_J_STR || !fname[0] ||
		    strchr(fname, '/')) {
			ret = pin__st_fail(ck, -EINVAL, "%s: weight_map entry \"%s\" is not a file name in the index's directory",
					   path, wm->keys[i]);
			goto out;
		}
		names[nn++] = wm->items[i]->s;
	}
	qsort(names, nn, sizeof(char *), cmp_str);
	for (i = 0; i < nn; i++) {
		char full[4096];

		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		snprintf(full, sizeof(full), "%s/%s", dirname(dir), names[i]);
		strcpy(dir, path);
		ret = pin__st_add_file(ck, full);
		if (ret) {
			pin__st_fail(ck, ret, "%s: out of memory", path);
			goto out;
		}
	}
out:
	free(names);
	free(dir);
	return ret;
}

/* Every map entry is in the file it names, and nothing else is. */
static int check_weight_map(struct pin_st *ck, const char *path,
			    const struct pin__jval *wm)
{
	size_t i;

	for (i = 0; i < wm->n; i++) {
		struct pin_st_tensor t = PIN_INIT(struct pin_st_tensor);
		const char *want = wm->items[i]->s;
		const char *have;

		if (pin_st_find(ck, wm->keys[i], &t))
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\" of the weight_map is not in %s",
					    path, wm->keys[i], want);
		have = strrchr(ck->files[t.file_index].path, '/') + 1;
		if (strcmp(have, want))
			return pin__st_fail(ck, -EINVAL, "%s: tensor \"%s\" is in %s, the weight_map says %s",
					    path, wm->keys[i], have, want);
	}
	if (wm->n != ck->n)
		return pin__st_fail(ck, -EINVAL, "%s: the shards hold %zu tensors, the weight_map names %zu",
				    path, ck->n, wm->n);
	return 0;
}

/* The index's string and number metadata, as the checkpoint's. */
static int add_index_meta(struct pin_st *ck, const char *path,
			  const struct pin__jval *meta)
{
	size_t i;
	int ret;

	if (!meta || meta->type != PIN_J_OBJ)
		return 0;
	for (i = 0; i < meta->n; i++) {
		const struct pin__jval *v = meta->items[i];

		if (v->type != PIN_J_STR && v->type != PIN_J_NUM)
			continue;
		ret = pin__st_add_meta(ck, meta->keys[i], v->s);
		if (ret)
			return pin__st_fail(ck, ret, "%s: out of memory", path);
	}
	return 0;
}

/* Parse the index at path into root; *text and *a hold what root points at. */
static int parse_index(struct pin_st *ck, const char *path, char **text,
		       struct pin__jarena *a, struct pin__jval **root)
{
	char jerr[256];
	size_t len = 0;
	int ret;

	ret = slurp(ck, path, text, &len);
	if (ret)
		return ret;
	ret = pin__json_parse(a, *text, len, " \t\r\n", root, jerr,
			      sizeof(jerr));
	if (ret)
		return pin__st_fail(ck, ret, "%s: %s", path,
				    ret == -EINVAL ? jerr : "out of memory");
	if ((*root)->type != PIN_J_OBJ)
		return pin__st_fail(ck, -EINVAL, "%s: index is not a JSON object",
				    path);
	return 0;
}

/*
 * A sharded checkpoint: parse the index, add its shards, give each to
 * take_shard (which loads it, or parses an image of it held elsewhere),
 * then hold the weight map to what they hold.
 */
int pin__st_index(struct pin_st *ck, const char *path,
		  int (*take_shard)(struct pin_st *ck, unsigned fi, void *arg),
		  void *arg)
{
	struct pin__jarena a = { 0 };
	const struct pin__jval *wm = NULL, *meta = NULL;
	struct pin__jval *root;
	char *text = NULL;
	size_t i;
	int ret;

	ret = parse_index(ck, path, &text, &a, &root);
	if (ret)
		goto out;
	for (i = 0; i < root->n; i++) {
		if (!strcmp(root->keys[i], "weight_map"))
			wm = root->items[i];
		else if (!strcmp(root->keys[i], "metadata"))
			meta = root->items[i];
	}
	if (!wm || wm->type != PIN_J_OBJ) {
		ret = pin__st_fail(ck, -EINVAL, "%s: index has no \"weight_map\" object",
				   path);
		goto out;
	}
	ret = add_shards(ck, path, wm);
	for (i = 0; i < ck->nfiles && !ret; i++)
		ret = take_shard(ck, (unsigned)i, arg);
	if (!ret)
		ret = pin__st_build_index(ck);
	if (!ret)
		ret = check_weight_map(ck, path, wm);
	if (!ret)
		ret = add_index_meta(ck, path, meta);
out:
	free(text);
	pin__json_free(&a);
	return ret;
}

struct index_load {
	struct pin_dev *dev;
	const struct pin_io_opts *o;
	struct st_progress *prog;
};

/* Progress counts every shard's bytes from the first one on. */
static int load_shard(struct pin_st *ck, unsigned fi, void *arg)
{
	struct index_load *l = arg;
	size_t i;

	for (i = 0; i < ck->nfiles && fi == 0; i++) {
		struct stat sb;

		if (stat(ck->files[i].path, &sb) == 0)
			l->prog->total += (uint64_t)sb.st_size + PIN_IO_ALIGN;
	}
	return pin__st_load_file(ck, l->dev, fi, l->o, l->prog);
}

int pin__st_load_index(struct pin_st *ck, struct pin_dev *dev,
		       const char *path, const struct pin_io_opts *o,
		       struct st_progress *prog)
{
	struct index_load l = { .dev = dev, .o = o, .prog = prog };

	return pin__st_index(ck, path, load_shard, &l);
}

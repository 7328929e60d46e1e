// SPDX-License-Identifier: GPL-2.0
/*
 * pinmem: kernel-arbitrated pinned host memory.
 *
 * The top of the module: init and exit, the misc device /dev/pinmem
 * (its ioctls are ioctl.c's) and the debugfs counters of limits.c's
 * totals.
 */
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>

#include "pinmem.h"

static struct dentry *pinmem_debugfs;

static const struct file_operations pinmem_dev_fops = {
	.owner		= THIS_MODULE,
	.unlocked_ioctl	= pinmem_dev_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/*
 * No mode here: devtmpfs makes the node root's, 0600, and the packaged udev
 * rule (debian/pinmem-dkms.udev) gives it to group pinmem, 0660.
 */
static struct miscdevice pinmem_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "pinmem",
	.fops	= &pinmem_dev_fops,
};

#define PINMEM_COUNTER(name, expr)					\
static int pinmem_##name##_get(void *data, u64 *val)			\
{									\
	*val = (expr);							\
	return 0;							\
}									\
DEFINE_DEBUGFS_ATTRIBUTE(pinmem_##name##_fops, pinmem_##name##_get,	\
			 NULL, "%llu\n")

PINMEM_COUNTER(regions, atomic64_read(&pinmem_totals.regions));
PINMEM_COUNTER(pages, atomic64_read(&pinmem_totals.pages));
PINMEM_COUNTER(mappings, atomic64_read(&pinmem_totals.mappings));
PINMEM_COUNTER(view_fds, atomic64_read(&pinmem_totals.view_fds));

static void pinmem_debugfs_init(void)
{
	pinmem_debugfs = debugfs_create_dir("pinmem", NULL);
	debugfs_create_file_unsafe("regions", 0444, pinmem_debugfs, NULL,
				   &pinmem_regions_fops);
	debugfs_create_file_unsafe("pages", 0444, pinmem_debugfs, NULL,
				   &pinmem_pages_fops);
	debugfs_create_file_unsafe("mappings", 0444, pinmem_debugfs, NULL,
				   &pinmem_mappings_fops);
	debugfs_create_file_unsafe("view_fds", 0444, pinmem_debugfs, NULL,
				   &pinmem_view_fds_fops);
	pinmem_gates_init(pinmem_debugfs);
}

static int __init pinmem_init(void)
{
	int ret;

	ret = pinmem_alloc_init();
	if (ret)
		return ret;
	ret = misc_register(&pinmem_misc);
	if (ret) {
		pinmem_alloc_exit();
		return ret;
	}
	pinmem_debugfs_init();
	return 0;
}

static void __exit pinmem_exit(void)
{
	debugfs_remove_recursive(pinmem_debugfs);
	pinmem_gates_exit();
	misc_deregister(&pinmem_misc);
	pinmem_alloc_exit();
}

module_init(pinmem_init);
module_exit(pinmem_exit);

MODULE_DESCRIPTION("Kernel-arbitrated pinned host memory");
MODULE_LICENSE("GPL");
MODULE_VERSION(PINMEM_VERSION);

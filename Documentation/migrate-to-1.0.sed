# SPDX-License-Identifier: MIT
#
# Rename libpin 0.2 names to their 1.0 names in C, Python and text:
#
#	sed -E -i -f migrate-to-1.0.sed FILE...
#
# GNU sed (for \< and \>). It does what a rewrite of one line can: the
# names; the flags that moved; the options structs of pin_dev_open,
# pin_region_create, pin_cuda_open and pin_st_load where the old call
# (pin_open, pin_open_why, pin_alloc, pin_alloc_on_node, pin_cuda_open,
# pin_st_load_on_node) fits on one line, as compound literals; and a
# .size for `= {0}`, designated initializers and compound literals of the
# extensible structs. Calls through an attribute (Python's lib.pin_open)
# only get the new name. What is left, the compiler names: an unknown
# function, an argument of the wrong type (pin_st_load's options), a
# pin_st_load_on_node call that spans lines (left as
# PIN_MIGRATE_ON_NODE(...)). By hand, after: a struct declared without an
# initializer, or reset with memset, needs its size (PIN_INIT); an array
# handed to libpin needs element 0's; pin_region_info's byte count is
# region_size (info.size still compiles, and is the struct's size). The
# table is in CHANGELOG.md (1.0.0). Running it twice changes nothing more.

# A designated initializer (or a compound literal) that opens on the
# declaration's line gets .size as its first member (first, so the renames
# below see both lines).
/\<struct pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step) +[A-Za-z_][A-Za-z0-9_]* *= *\{ *$/{
N
s/\<struct (pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step)) +([A-Za-z_][A-Za-z0-9_]*) *= *\{ *\n([ \t]*)\.([a-z])/struct \1 \3 = {\n\4.size = sizeof(struct \1),\n\4.\5/
s/\n([ \t]*)\.size = sizeof\(struct (pin_[a-z_]+)\),\n[ \t]*\.size = sizeof\(struct \2\),/\n\1.size = sizeof(struct \2),/
}

/\(struct pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step)\)\{ *$/{
N
s/\((struct pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step))\)\{ *\n([ \t]*)\.([a-z])/(\1){\n\3.size = sizeof(\1),\n\3.\4/
s/\n([ \t]*)\.size = sizeof\(struct (pin_[a-z_]+)\),\n[ \t]*\.size = sizeof\(struct \2\),/\n\1.size = sizeof(struct \2),/
}

# The rewrites of arguments are for C: a call through an attribute
# (Python's lib.pin_open(...)) keeps its arguments and only gets the new
# name below.
s/\.pin_(open_why|cuda_open|alloc_on_node|st_load_on_node|alloc|open)\(/.PIN_MIGRATE_KEEP_\1(/g

# pin_open_why(&dev, backend, why, len) and pin_cuda_open(&c, device, why,
# len): the text goes to the why buffer of the options.
s/\<pin_open_why\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/pin_dev_open(\1, \3, \&(struct pin_dev_opts){ .size = sizeof(struct pin_dev_opts), .why = \5, .why_len = \7 })/g
s/\<pin_cuda_open\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/pin_cuda_open(\1, \3, \&(struct pin_cuda_opts){ .size = sizeof(struct pin_cuda_opts), .why = \5, .why_len = \7 })/g
# pin_alloc_on_node(dev, size, flags, node, &r) and pin_st_load_on_node(ck,
# dev, path, node, flags, io): node -1 was "no node"; PIN_REGION_NODE says
# there is one.
s/\<pin_alloc_on_node\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/pin_region_create(\1, \3, \&(struct pin_region_opts){ .size = sizeof(struct pin_region_opts), .flags = (\5) | ((\7) != -1 ? PIN_REGION_NODE : 0), .node = \7 }, \9)/g
s/\<pin_st_load_on_node\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), */pin_st_load(\1, \3, \5, PIN_MIGRATE_ON_NODE(/g
s/\<PIN_MIGRATE_ON_NODE\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/\&(struct pin_st_load_opts){ .size = sizeof(struct pin_st_load_opts), .region = \&(struct pin_region_opts){ .size = sizeof(struct pin_region_opts), .flags = (\3) | ((\1) != -1 ? PIN_REGION_NODE : 0), .node = \1 }, .io = \5 })/g
# pin_alloc(dev, size, 0, &r) -> pin_region_create(dev, size, NULL, &r);
# other flags go into a struct pin_region_opts. An argument is a run of
# anything but parentheses and commas, or one level of parentheses.
s/\<pin_alloc\(((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)), *0 *, *(([^(),]|\([^()]*\))+)\)/pin_region_create(\1, NULL, \6)/g
s/\<pin_alloc\(((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)), *(([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/pin_region_create(\1, \&(struct pin_region_opts){ .size = sizeof(struct pin_region_opts), .flags = \6 }, \8)/g
# pin_open(&dev, backend) -> pin_dev_open(&dev, backend, NULL)
s/\<pin_open\((([^(),]|\([^()]*\))+), *(([^(),]|\([^()]*\))+)\)/pin_dev_open(\1, \3, NULL)/g

s/\.PIN_MIGRATE_KEEP_([a-z_]+)\(/.pin_\1(/g

# Plain renames, longer names first; \< \> keep to whole names.
s/\<pin_dev_holders\>/pin_dev_region_holders/g
s/\<pin_dev_refs\>/pin_dev_region_refs/g
s/\<pin_dev_list\>/pin_dev_regions/g
s/\<pin_region_free\>/pin_region_close/g
s/\<pin_read_file\>/pin_region_read_file/g
s/\<pin_write_file\>/pin_region_write_file/g
s/\<pin_io_read\>/pin_file_read/g
s/\<pin_io_write\>/pin_file_write/g
s/\<pin_io_span\>/pin_file_span/g
s/\<pin_send_fd\>/pin_fd_send/g
s/\<pin_recv_fd\>/pin_fd_recv/g
s/\<pin_st_new\>/pin_st_create/g
s/\<pin_st_free\>/pin_st_close/g
s/\<pin_holders\>/pin_region_holders/g
s/\<pin_refs\>/pin_region_refs/g
s/\<pin_publish\>/pin_region_publish/g
s/\<pin_donate\>/pin_region_donate/g
s/\<pin_reopen\>/pin_region_reopen/g
s/\<pin_seal\>/pin_region_seal/g
s/\<pin_alloc\>/pin_region_create/g
s/\<pin_close\>/pin_dev_close/g
s/\<pin_open\>/pin_dev_open/g
s/\<PIN_ALLOC_FALLBACK\>/PIN_REGION_FALLBACK/g
s/\<PIN_ALLOC_ANY_NODE\>/PIN_REGION_ANY_NODE/g

# Extensible structs begin with the size the caller sets: `= {0}` becomes
# PIN_INIT, and a designated initializer gets .size first.
s/\<struct (pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step)) +([A-Za-z_][A-Za-z0-9_]*) *= *\{ *0 *\}/struct \1 \3 = PIN_INIT(struct \1)/g
s/\<struct (pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step)) +([A-Za-z_][A-Za-z0-9_]*) *= *\{ *\.([a-z])/struct \1 \3 = { .size = sizeof(struct \1), .\4/g
# and so does a compound literal.
s/\((struct pin_(io_opts|io_stats|dev_info|region_info|holder|ref_range|st_tensor|st_phases|st_step))\)\{ *\.([a-z])/(\1){ .size = sizeof(\1), .\3/g
s/\.size = sizeof\(struct (pin_[a-z_]+)\), \.size = sizeof\(struct \1\), /.size = sizeof(struct \1), /g

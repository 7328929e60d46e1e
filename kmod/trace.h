/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinmem trace events (tracefs events/pinmem/, perf, trace-cmd, bpftrace):
 * region alloc and free, populate and fill (ALLOC_LAZY), view creation,
 * mappings admitted or refused,
 * seal, donate (result, time waited, the view mappings that refused it),
 * publish and reopen. One line at each call site; kmod/trace.c makes them.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM pinmem

#if !defined(PINMEM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define PINMEM_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(pinmem_alloc,
	    TP_PROTO(u64 id, u64 size, unsigned long nr_chunks,
		     unsigned int min_order, int ret),
	    TP_ARGS(id, size, nr_chunks, min_order, ret),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, size)
			     __field(unsigned long, nr_chunks)
			     __field(unsigned int, min_order)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = id;
			   __entry->size = size;
			   __entry->nr_chunks = nr_chunks;
			   __entry->min_order = min_order;
			   __entry->ret = ret;),
	    TP_printk("region=%llu size=%llu chunks=%lu min_order=%u ret=%d",
		      __entry->id, __entry->size, __entry->nr_chunks,
		      __entry->min_order, __entry->ret)
);

TRACE_EVENT(pinmem_free,
	    TP_PROTO(u64 id, u64 size),
	    TP_ARGS(id, size),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, size)),
	    TP_fast_assign(__entry->id = id;
			   __entry->size = size;),
	    TP_printk("region=%llu size=%llu",
		      __entry->id, __entry->size)
);

TRACE_EVENT(pinmem_populate,
	    TP_PROTO(u64 id, u64 offset, u64 length, unsigned long nr_new,
		     int ret),
	    TP_ARGS(id, offset, length, nr_new, ret),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, offset)
			     __field(u64, length)
			     __field(unsigned long, nr_new)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = id;
			   __entry->offset = offset;
			   __entry->length = length;
			   __entry->nr_new = nr_new;
			   __entry->ret = ret;),
	    TP_printk("region=%llu offset=%llu length=%llu chunks=%lu ret=%d",
		      __entry->id, __entry->offset, __entry->length,
		      __entry->nr_new, __entry->ret)
);

TRACE_EVENT(pinmem_fill,
	    TP_PROTO(u64 id, u64 offset, u64 length, u64 bytes, int ret),
	    TP_ARGS(id, offset, length, bytes, ret),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, offset)
			     __field(u64, length)
			     __field(u64, bytes)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = id;
			   __entry->offset = offset;
			   __entry->length = length;
			   __entry->bytes = bytes;
			   __entry->ret = ret;),
	    TP_printk("region=%llu offset=%llu length=%llu bytes=%llu ret=%d",
		      __entry->id, __entry->offset, __entry->length,
		      __entry->bytes, __entry->ret)
);

TRACE_EVENT(pinmem_view_create,
	    TP_PROTO(u64 id, u64 offset, u64 length, bool write, int ret),
	    TP_ARGS(id, offset, length, write, ret),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, offset)
			     __field(u64, length)
			     __field(bool, write)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = id;
			   __entry->offset = offset;
			   __entry->length = length;
			   __entry->write = write;
			   __entry->ret = ret;),
	    TP_printk("region=%llu offset=%llu length=%llu %s ret=%d",
		      __entry->id, __entry->offset, __entry->length,
		      __entry->write ? "rw" : "ro", __entry->ret)
);

TRACE_EVENT(pinmem_mmap,
	    TP_PROTO(u64 id, bool view, unsigned long start,
		     unsigned long len, bool write, u32 state, int ret),
	    TP_ARGS(id, view, start, len, write, state, ret),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(unsigned long, start)
			     __field(unsigned long, len)
			     __field(u32, state)
			     __field(int, ret)
			     __field(bool, view)
			     __field(bool, write)),
	    TP_fast_assign(__entry->id = id;
			   __entry->start = start;
			   __entry->len = len;
			   __entry->state = state;
			   __entry->ret = ret;
			   __entry->view = view;
			   __entry->write = write;),
	    TP_printk("region=%llu %s mapping len=%lu %s state=%u %s ret=%d",
		      __entry->id, __entry->view ? "view" : "owner",
		      __entry->len, __entry->write ? "rw" : "ro", __entry->state,
		      __entry->ret ? "refused" : "admitted", __entry->ret)
);

TRACE_EVENT(pinmem_seal,
	    TP_PROTO(u64 id, int ret, u64 writable_view_mappings),
	    TP_ARGS(id, ret, writable_view_mappings),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, writable_view_mappings)
			     __field(int, ret)),
	    TP_fast_assign(__entry->id = id;
			   __entry->writable_view_mappings = writable_view_mappings;
			   __entry->ret = ret;),
	    TP_printk("region=%llu ret=%d writable_view_mappings=%llu",
		      __entry->id, __entry->ret, __entry->writable_view_mappings)
);

TRACE_EVENT(pinmem_donate,
	    TP_PROTO(u64 id, int ret, u64 waited_ns, u64 view_mappings,
		     bool wait),
	    TP_ARGS(id, ret, waited_ns, view_mappings, wait),
	    TP_STRUCT__entry(__field(u64, id)
			     __field(u64, waited_ns)
			     __field(u64, view_mappings)
			     __field(int, ret)
			     __field(bool, wait)),
	    TP_fast_assign(__entry->id = id;
			   __entry->waited_ns = waited_ns;
			   __entry->view_mappings = view_mappings;
			   __entry->ret = ret;
			   __entry->wait = wait;),
	    TP_printk("region=%llu ret=%d waited_ns=%llu %s view_mappings=%llu",
		      __entry->id, __entry->ret, __entry->waited_ns,
		      __entry->wait ? "wait" : "nowait", __entry->view_mappings)
);

DECLARE_EVENT_CLASS(pinmem_transition,
		    TP_PROTO(u64 id, int ret, u32 state),
		    TP_ARGS(id, ret, state),
		    TP_STRUCT__entry(__field(u64, id)
				     __field(int, ret)
				     __field(u32, state)),
		    TP_fast_assign(__entry->id = id;
				   __entry->ret = ret;
				   __entry->state = state;),
		    TP_printk("region=%llu ret=%d state=%u",
			      __entry->id, __entry->ret, __entry->state)
);

DEFINE_EVENT(pinmem_transition, pinmem_publish,
	     TP_PROTO(u64 id, int ret, u32 state),
	     TP_ARGS(id, ret, state)
);

DEFINE_EVENT(pinmem_transition, pinmem_reopen,
	     TP_PROTO(u64 id, int ret, u32 state),
	     TP_ARGS(id, ret, state)
);

#endif /* PINMEM_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>

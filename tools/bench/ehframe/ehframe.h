/* Bench-only prototype: the tables and events shared by ehframe.bpf.c and ehframe.cpp. */
#ifndef EHFRAME_BENCH_H
#define EHFRAME_BENCH_H

#define EHF_MAX_FRAMES 128  /* a power of two */
#define EHF_MAX_MAPPINGS 128

#define EHF_MODE_NONE 0 /* the program shell alone: filter, registers, a header record */
#define EHF_MODE_WALK 1 /* unwind with the tables, send the pcs */
#define EHF_MODE_COPY 2 /* pybpfprof --native's capture: 16 KiB of stack from sp */

/* One row of a file's table: from pc (the file's ELF address, 32 bits) to the next row's pc. */
#define EHF_ROW_CFA_RSP 0     /* CFA = rsp + cfa_off */
#define EHF_ROW_CFA_RBP 1     /* CFA = rbp + cfa_off */
#define EHF_ROW_UNSUPPORTED 2 /* a CFA expression, another register, RA not at CFA-8, ... */
#define EHF_ROW_END 3         /* RA undefined: the outermost frame (_start, clone's child) */
#define EHF_ROW_NO_CFI 4      /* between FDEs: no CFI (frame pointers, as libdwfl does) */

#define EHF_RBP_SAME 0      /* rbp unchanged */
#define EHF_RBP_AT_CFA 1    /* rbp saved at CFA + rbp_off */
#define EHF_RBP_UNDEFINED 2 /* rbp's rule is one the compact form cannot express */

/* 8 bytes (an array map rounds its values up to 8) */
struct ehf_row {
	__u32 pc;
	__s16 cfa_off;
	__u8 kind_rbp;  /* kind | rbp_rule << 4 */
	__s8 rbp_off8;  /* EHF_RBP_AT_CFA: rbp saved at CFA + 8 * rbp_off8 */
};
#define EHF_KIND(r) ((r)->kind_rbp & 15)
#define EHF_RBP_RULE(r) ((r)->kind_rbp >> 4)

struct ehf_mapping {
	__u64 start, end; /* the executable mapping */
	__u64 bias;       /* its ELF address = pc - bias */
	__u32 row_start, row_count;
	/* --index: the file's page index, pages[page_start + ((addr - page_lo) >> EHF_PAGE_SHIFT)] */
	__u64 page_lo;
	__u32 page_start, npages;
};

/* --index: for every EHF_PAGE bytes of a file's code, the rows that can hold its addresses (the
 * row covering the page's first byte, up to the last row starting in the page), so that the
 * binary search is over a few rows instead of the file's (the OTel profiler's "stack delta
 * pages" play this part). */
#define EHF_PAGE_SHIFT 9
struct ehf_page {
	__u32 first, count; /* global row indices */
};

#define EHF_EV_WALK 1
#define EHF_EV_COPY 2

#define EHF_END_MAX_FRAMES 0
#define EHF_END_OUTERMOST 1   /* complete: RA undefined or 0 */
#define EHF_END_NO_MAPPING 2  /* pc in no known executable mapping */
#define EHF_END_UNSUPPORTED 3 /* a row the compact form cannot express */
#define EHF_END_NO_CFI 4      /* no CFI and no frame pointer */
#define EHF_END_READ 5        /* bpf_probe_read_user failed */
#define EHF_END_REGISTER 6    /* CFA from rbp, whose value was lost */
#define EHF_END_COUNT 7

struct ehf_event {
	__u64 ts_ns;
	__u32 type; /* EHF_EV_WALK */
	__u32 pid, tid, cpu;
	__u64 ip, sp, bp;
	__u64 walk_ns;
	__u16 n, end, fp_frames, flags;
	__u32 kdepth, pad;
	__u64 pcs[EHF_MAX_FRAMES]; /* pcs[0] = ip, then return addresses */
};

#endif

;; The pg-wal/ reader's hot loop in WebAssembly: CRC-32C (slice-by-16, PostgreSQL's polynomial) and
;; a walk over the records that lie whole inside one validated page, each checked as
;; ValidXLogRecordHeader, ValidXLogRecord and DecodeXLogRecord check it (xlogreader.c). It only
;; says yes or stops: on any doubt it returns, and the TypeScript reader (reader.ts) reads that
;; record again with every check and PostgreSQL's message. Source of scan-wasm-bytes.ts
;; (rebuilt by scripts/package/scan-wasm.ts; test/unit/pg-wal-scan-wasm.test.ts checks the bytes).
;;
;; Memory (imported, laid out by scan-wasm.ts): [0, 16384) CRC tables 0-15, TABLE[k][b] at
;; k * 1024 + b * 4, the CRC of byte b followed by k zero bytes (16-19 further on); then scan's
;; output, a column per value, 4096 records: [16384) window address i32, [32768) FPI bytes i32,
;; [49152) xl_tot_len i32, [65536) LSN f64, [98304) end LSN f64, [131072) xl_rmid u8, [135168)
;; xl_info u8; for `views()` (scan's flag 8) also [139264) main data length i32, [155648) first
;; block slot i32, [172032) block count u8, and the block references of one scan, 1024 slots:
;; [176128) spcOid u32, [180224) dbOid u32, [184320) relNumber u32, [188416) block number u32,
;; [192512) fork u8; then [193536, 197632) CRC tables 16-19, TABLE[k][b] at 193536 + (k - 16) *
;; 1024 + b * 4; everything from 197632 on is the caller's. The memory is shared: a worker
;; thread runs `verdicts` over the window the main thread will scan next (scan-wasm.ts
;; `CrcWorker`).
(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; COMP_CRC32C over [i, end), the running (unfinished) state in, the new state out; then, when
  ;; $hdr is not 0, over the 20 bytes at $hdr too (a record's header up to xl_crc). Slice-by-16
  ;; over the data, then ONE step of exactly the bytes left (a br_table on 0-15: one branch that
  ;; may be mispredicted and one step, where halving steps of 8, 4, 2, 1 took up to four of each),
  ;; then one step of 20 for the header. In a step of N bytes, byte k is looked up in
  ;; TABLE[N - 1 - k] (the CRC of that byte followed by N - 1 - k zero bytes), the running CRC
  ;; XORed into the first four bytes: the lookups of the other words are XORed together first
  ;; ($x), so only the first word's four wait for the step before. A table index is byte b of a
  ;; word times 4: (w >> (8b - 2)) & 1020, one shift and one mask. The header in the same call:
  ;; each call costs more than a step.
  (func $crc (param $c i32) (param $i i32) (param $end i32) (param $hdr i32) (result i32)
    (local $w i32) (local $x i32)
    (block $done
      (loop $sixteen
        (br_if $done (i32.lt_s (i32.sub (local.get $end) (local.get $i)) (i32.const 16)))
        (local.set $w (i32.load offset=4 (local.get $i)))
        (local.set $x
          (i32.xor
            (i32.xor
              (i32.load offset=11264
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=10240
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=9216
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=8192
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
        (local.set $w (i32.load offset=8 (local.get $i)))
        (local.set $x
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=7168
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=6144
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=5120
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load offset=4096
                  (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $w (i32.load offset=12 (local.get $i)))
        (local.set $x
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=3072
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=2048
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=1024
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
        (local.set $c
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=15360
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=14336
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=13312
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load offset=12288
                  (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $sixteen)))
    (block $tail
      (block $r0 (block $r1 (block $r2 (block $r3 (block $r4 (block $r5 (block $r6 (block $r7
      (block $r8 (block $r9 (block $r10 (block $r11 (block $r12 (block $r13 (block $r14 (block $r15
        (br_table $r0 $r1 $r2 $r3 $r4 $r5 $r6 $r7 $r8 $r9 $r10 $r11 $r12 $r13 $r14 $r15 $r0
          (i32.sub (local.get $end) (local.get $i))))
      ;; 15 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=10240
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=9216
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=8192
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=7168
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=6144
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=5120
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=4096
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (local.set $w
        (i32.or
          (i32.load16_u offset=12 (local.get $i))
          (i32.shl (i32.load8_u offset=14 (local.get $i)) (i32.const 16))))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=2048
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=14336
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=13312
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=12288
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=11264
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 14 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=9216
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=8192
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=7168
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=6144
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=5120
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=4096
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=2048
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (local.set $w (i32.load16_u offset=12 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.load offset=1024
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=13312
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=12288
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=11264
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=10240
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 13 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=8192
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=7168
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=6144
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=5120
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=4096
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=2048
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (local.set $w (i32.load8_u offset=12 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.load (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=12288
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=11264
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=10240
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=9216
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 12 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=7168
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=6144
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=5120
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=4096
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=3072
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=2048
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=11264
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=10240
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=9216
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=8192
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 11 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=6144
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=5120
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=4096
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=3072
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w
        (i32.or
          (i32.load16_u offset=8 (local.get $i))
          (i32.shl (i32.load8_u offset=10 (local.get $i)) (i32.const 16))))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=2048
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=10240
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=9216
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=8192
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=7168
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 10 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=5120
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=4096
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=3072
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=2048
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load16_u offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.load offset=1024
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=9216
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=8192
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=7168
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=6144
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 9 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=4096
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=3072
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=2048
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load offset=1024
              (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.load8_u offset=8 (local.get $i)))
      (local.set $x
        (i32.xor
          (local.get $x)
          (i32.load (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=8192
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=7168
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=6144
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=5120
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 8 bytes left
      (local.set $w (i32.load offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=3072
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=2048
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=1024
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=7168
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=6144
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=5120
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=4096
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 7 bytes left
      (local.set $w
        (i32.or
          (i32.load16_u offset=4 (local.get $i))
          (i32.shl (i32.load8_u offset=6 (local.get $i)) (i32.const 16))))
      (local.set $x
        (i32.xor
          (i32.xor
            (i32.load offset=2048
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=1024
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=6144
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=5120
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=4096
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 6 bytes left
      (local.set $w (i32.load16_u offset=4 (local.get $i)))
      (local.set $x
        (i32.xor
          (i32.load offset=1024 (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
          (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020)))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=5120
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=4096
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=2048
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 5 bytes left
      (local.set $w (i32.load8_u offset=4 (local.get $i)))
      (local.set $x (i32.load (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020))))
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (local.get $x)
          (i32.xor
            (i32.xor
              (i32.load offset=4096
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=3072
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=2048
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
      (br $tail))
      ;; 4 bytes left
      (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
      (local.set $c
        (i32.xor
          (i32.xor
            (i32.load offset=3072
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load offset=2048
              (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
          (i32.xor
            (i32.load offset=1024
              (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
      (br $tail))
      ;; 3 bytes left
      (local.set $w
        (i32.xor
          (local.get $c)
          (i32.or
            (i32.load16_u (local.get $i))
            (i32.shl (i32.load8_u offset=2 (local.get $i)) (i32.const 16)))))
      (local.set $c
        (i32.xor
          (i32.shr_u (local.get $c) (i32.const 24))
          (i32.xor
            (i32.xor
              (i32.load offset=2048
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=1024
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020))))))
      (br $tail))
      ;; 2 bytes left
      (local.set $w (i32.xor (local.get $c) (i32.load16_u (local.get $i))))
      (local.set $c
        (i32.xor
          (i32.shr_u (local.get $c) (i32.const 16))
          (i32.xor
            (i32.load offset=1024
              (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
            (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))))
      (br $tail))
      ;; 1 byte left
      (local.set $w (i32.xor (local.get $c) (i32.load8_u (local.get $i))))
      (local.set $c
        (i32.xor
          (i32.shr_u (local.get $c) (i32.const 8))
          (i32.load (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))))
      (br $tail))
      )
    (if (local.get $hdr)
      (then
        (local.set $i (local.get $hdr))
        (local.set $w (i32.load offset=4 (local.get $i)))
        (local.set $x
          (i32.xor
            (i32.xor
              (i32.load offset=15360
                (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
              (i32.load offset=14336
                (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
            (i32.xor
              (i32.load offset=13312
                (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
              (i32.load offset=12288
                (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020))))))
        (local.set $w (i32.load offset=8 (local.get $i)))
        (local.set $x
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=11264
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=10240
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=9216
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load offset=8192
                  (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $w (i32.load offset=12 (local.get $i)))
        (local.set $x
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=7168
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=6144
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=5120
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load offset=4096
                  (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $w (i32.load offset=16 (local.get $i)))
        (local.set $x
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=3072
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=2048
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=1024
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))
        (local.set $w (i32.xor (local.get $c) (i32.load (local.get $i))))
        (local.set $c
          (i32.xor
            (local.get $x)
            (i32.xor
              (i32.xor
                (i32.load offset=196608
                  (i32.and (i32.shl (local.get $w) (i32.const 2)) (i32.const 1020)))
                (i32.load offset=195584
                  (i32.and (i32.shr_u (local.get $w) (i32.const 6)) (i32.const 1020))))
              (i32.xor
                (i32.load offset=194560
                  (i32.and (i32.shr_u (local.get $w) (i32.const 14)) (i32.const 1020)))
                (i32.load offset=193536
                  (i32.and (i32.shr_u (local.get $w) (i32.const 22)) (i32.const 1020)))))))))
    (local.get $c))

  ;; COMP_CRC32C over [i, end) (for the tests: scan-wasm.ts `crc32cUpdate`).
  (func (export "crc") (param $c i32) (param $i i32) (param $end i32) (result i32)
    (call $crc (local.get $c) (local.get $i) (local.get $end) (i32.const 0)))

  ;; Bytes from one place of the memory to another (reader.ts reassembling a record).
  (func (export "copy") (param $to i32) (param $from i32) (param $n i32)
    (memory.copy (local.get $to) (local.get $from) (local.get $n)))

  ;; ValidXLogRecord: CRC-32C of the bytes after the 24-byte header, then of the header up to
  ;; xl_crc (offset 20), finished, equal to xl_crc. 1 when equal.
  (func $crc_ok (export "recordCrcOk") (param $o i32) (param $tot i32) (result i32)
    (i32.eq
      (i32.xor
        (call $crc (i32.const -1) (i32.add (local.get $o) (i32.const 24))
          (i32.add (local.get $o) (local.get $tot)) (local.get $o))
        (i32.const -1))
      (i32.load offset=20 (local.get $o))))

  ;; DecodeXLogRecord's checks of the header fragments of the record at $o (xl_tot_len $tot):
  ;; block headers in order (data length against BKPBLOCK_HAS_DATA, the image header's hole and
  ;; compression, BKPBLOCK_SAME_REL after a relation), origin, top-level xid (flags bit 0),
  ;; main data last, and everything adding up to xl_tot_len. The bytes of full-page images
  ;; (bimg_len summed), or -1 when any check fails. $comp: the major's BKPIMAGE_COMPRESSED bits.
  ;; $i >= 0 (a scan for views): the walk also writes what DecodeXLogRecord keeps — each block
  ;; reference's relation (the one before for BKPBLOCK_SAME_REL), fork and block number into the
  ;; block slots from $bo on, and the record's main data length, first slot and block count
  ;; into the output columns at index $i — so the reader needs no second walk of the fragments.
  (func $fragments (param $o i32) (param $tot i32) (param $xid_ok i32) (param $comp i32)
    (param $i i32) (param $bo i32) (result i32)
    (local $p i32) (local $end i32) (local $datatotal i32) (local $max_id i32) (local $rel i32)
    (local $fpi i32) (local $id i32) (local $flags i32) (local $len i32) (local $hoff i32)
    (local $hlen i32) (local $binfo i32) (local $hole i32) (local $compressed i32)
    (local $main i32) (local $nb i32) (local $slot i32) (local $spc i32) (local $db i32)
    (local $relno i32)
    (local.set $p (i32.add (local.get $o) (i32.const 24)))
    (local.set $end (i32.add (local.get $o) (local.get $tot)))
    (local.set $max_id (i32.const -1))
    (block $bad
      (block $main
        (loop $next
          ;; while (end - p > datatotal): every length here is below 2^31 (the record is
          ;; inside one page and a long main data length is refused above xl_tot_len).
          (br_if $main
            (i32.le_s (i32.sub (local.get $end) (local.get $p)) (local.get $datatotal)))
          (local.set $id (i32.load8_u (local.get $p)))
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          ;; XLR_BLOCK_ID_DATA_SHORT
          (if (i32.eq (local.get $id) (i32.const 255))
            (then
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 1)))
              (local.set $main (i32.load8_u (local.get $p)))
              (local.set $datatotal (i32.add (local.get $datatotal) (local.get $main)))
              (local.set $p (i32.add (local.get $p) (i32.const 1)))
              (br $main)))
          ;; XLR_BLOCK_ID_DATA_LONG
          (if (i32.eq (local.get $id) (i32.const 254))
            (then
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 4)))
              (local.set $len (i32.load (local.get $p)))
              (br_if $bad (i32.gt_u (local.get $len) (local.get $tot)))
              (local.set $main (local.get $len))
              (local.set $datatotal (i32.add (local.get $datatotal) (local.get $len)))
              (local.set $p (i32.add (local.get $p) (i32.const 4)))
              (br $main)))
          ;; XLR_BLOCK_ID_ORIGIN
          (if (i32.eq (local.get $id) (i32.const 253))
            (then
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 2)))
              (local.set $p (i32.add (local.get $p) (i32.const 2)))
              (br $next)))
          ;; XLR_BLOCK_ID_TOPLEVEL_XID (14+)
          (if (i32.and (i32.eq (local.get $id) (i32.const 252)) (local.get $xid_ok))
            (then
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 4)))
              (local.set $p (i32.add (local.get $p) (i32.const 4)))
              (br $next)))
          ;; A block header, id 0–32, ids increasing.
          (br_if $bad (i32.gt_u (local.get $id) (i32.const 32)))
          (br_if $bad (i32.le_s (local.get $id) (local.get $max_id)))
          (local.set $max_id (local.get $id))
          (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 3)))
          (local.set $flags (i32.load8_u (local.get $p)))
          (local.set $len (i32.load16_u offset=1 (local.get $p)))
          (local.set $p (i32.add (local.get $p) (i32.const 3)))
          ;; BKPBLOCK_HAS_DATA (0x20) exactly when there is data.
          (br_if $bad
            (i32.ne (i32.eqz (i32.and (local.get $flags) (i32.const 0x20)))
              (i32.eqz (local.get $len))))
          (local.set $datatotal (i32.add (local.get $datatotal) (local.get $len)))
          ;; BKPBLOCK_HAS_IMAGE (0x10): the 5-byte image header, + 2 for a compressed hole.
          (if (i32.and (local.get $flags) (i32.const 0x10))
            (then
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 5)))
              (local.set $len (i32.load16_u (local.get $p)))
              (local.set $hoff (i32.load16_u offset=2 (local.get $p)))
              (local.set $binfo (i32.load8_u offset=4 (local.get $p)))
              (local.set $p (i32.add (local.get $p) (i32.const 5)))
              (local.set $hole (i32.and (local.get $binfo) (i32.const 1)))
              (local.set $compressed
                (i32.ne (i32.and (local.get $binfo) (local.get $comp)) (i32.const 0)))
              (local.set $hlen (i32.sub (i32.const 8192) (local.get $len)))
              (if (local.get $compressed)
                (then
                  (local.set $hlen (i32.const 0))
                  (if (local.get $hole)
                    (then
                      (br_if $bad
                        (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 2)))
                      (local.set $hlen (i32.load16_u (local.get $p)))
                      (local.set $p (i32.add (local.get $p) (i32.const 2)))))))
              ;; The four cross-checks of DecodeXLogRecord.
              (if (local.get $hole)
                (then
                  (br_if $bad (i32.eqz (local.get $hoff)))
                  (br_if $bad (i32.eqz (local.get $hlen)))
                  (br_if $bad (i32.eq (local.get $len) (i32.const 8192))))
                (else
                  (br_if $bad (i32.ne (local.get $hoff) (i32.const 0)))
                  (br_if $bad (i32.ne (local.get $hlen) (i32.const 0)))))
              (br_if $bad
                (i32.and (local.get $compressed) (i32.eq (local.get $len) (i32.const 8192))))
              (br_if $bad
                (i32.and
                  (i32.eqz (i32.or (local.get $hole) (local.get $compressed)))
                  (i32.ne (local.get $len) (i32.const 8192))))
              (local.set $datatotal (i32.add (local.get $datatotal) (local.get $len)))
              (local.set $fpi (i32.add (local.get $fpi) (local.get $len)))))
          ;; RelFileNode unless BKPBLOCK_SAME_REL (0x80), which needs an earlier one.
          (if (i32.and (local.get $flags) (i32.const 0x80))
            (then (br_if $bad (i32.eqz (local.get $rel))))
            (else
              (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 12)))
              (local.set $spc (i32.load (local.get $p)))
              (local.set $db (i32.load offset=4 (local.get $p)))
              (local.set $relno (i32.load offset=8 (local.get $p)))
              (local.set $p (i32.add (local.get $p) (i32.const 12)))
              (local.set $rel (i32.const 1))))
          ;; The block number.
          (br_if $bad (i32.lt_s (i32.sub (local.get $end) (local.get $p)) (i32.const 4)))
          (if (i32.ge_s (local.get $i) (i32.const 0))
            (then
              (local.set $slot (i32.add (local.get $bo) (local.get $nb)))
              (i32.store offset=176128 (i32.shl (local.get $slot) (i32.const 2)) (local.get $spc))
              (i32.store offset=180224 (i32.shl (local.get $slot) (i32.const 2)) (local.get $db))
              (i32.store offset=184320 (i32.shl (local.get $slot) (i32.const 2))
                (local.get $relno))
              (i32.store offset=188416 (i32.shl (local.get $slot) (i32.const 2))
                (i32.load (local.get $p)))
              ;; BKPBLOCK_FORK_MASK
              (i32.store8 offset=192512 (local.get $slot)
                (i32.and (local.get $flags) (i32.const 0x0f)))))
          (local.set $nb (i32.add (local.get $nb) (i32.const 1)))
          (local.set $p (i32.add (local.get $p) (i32.const 4)))
          (br $next)))
      (br_if $bad (i32.ne (i32.sub (local.get $end) (local.get $p)) (local.get $datatotal)))
      (if (i32.ge_s (local.get $i) (i32.const 0))
        (then
          (i32.store offset=139264 (i32.shl (local.get $i) (i32.const 2)) (local.get $main))
          (i32.store offset=155648 (i32.shl (local.get $i) (i32.const 2)) (local.get $bo))
          (i32.store8 offset=172032 (local.get $i) (local.get $nb))))
      (return (local.get $fpi)))
    (i32.const -1))

  ;; ValidXLogRecord for a record at $o (xl_tot_len $tot) that continues past its page's end
  ;; $pend: CRC-32C over its bytes after the header on this page, then on each next page the
  ;; bytes after that page's header (40 bytes with XLP_LONG_HEADER, else 24) up to what is still
  ;; missing, then the header up to xl_crc. 0 when a page it needs lies at or past $end (the
  ;; window's end): no verdict then. The reader reassembles the same bytes once it has checked
  ;; each page's XLP_FIRST_IS_CONTRECORD and xlp_rem_len (reader.ts readSpanning).
  (func $spanning_crc_ok (param $o i32) (param $tot i32) (param $pend i32) (param $end i32)
    (result i32)
    (local $c i32) (local $missing i32) (local $pg i32) (local $p i32) (local $take i32)
    (local.set $c (call $crc (i32.const -1) (i32.add (local.get $o) (i32.const 24))
      (local.get $pend) (i32.const 0)))
    (local.set $missing (i32.sub (local.get $tot) (i32.sub (local.get $pend) (local.get $o))))
    (local.set $pg (local.get $pend))
    (block $done
      (loop $page
        (br_if $done (i32.eqz (local.get $missing)))
        ;; The page must lie whole inside the window (pages are 8 kB, the window whole pages).
        (if (i32.ge_u (local.get $pg) (local.get $end)) (then (return (i32.const 0))))
        (local.set $p
          (i32.add (local.get $pg)
            (select (i32.const 40) (i32.const 24)
              (i32.and (i32.load16_u offset=2 (local.get $pg)) (i32.const 2)))))
        (local.set $take (i32.sub (i32.add (local.get $pg) (i32.const 8192)) (local.get $p)))
        (if (i32.lt_u (local.get $missing) (local.get $take))
          (then (local.set $take (local.get $missing))))
        (local.set $c (call $crc (local.get $c) (local.get $p)
          (i32.add (local.get $p) (local.get $take)) (i32.const 0)))
        (local.set $missing (i32.sub (local.get $missing) (local.get $take)))
        (local.set $pg (i32.add (local.get $pg) (i32.const 8192)))
        (br $page)))
    (i32.eq
      (i32.xor
        (call $crc (local.get $c) (local.get $o) (local.get $o) (local.get $o))
        (i32.const -1))
      (i32.load offset=20 (local.get $o))))

  ;; The CRC worker's pass over a window of $len bytes (whole pages) at $win: for every record
  ;; that starts where the page's records start (after the header and any continuation data,
  ;; xlp_rem_len MAXALIGNed) or after one such, and lies inside the window (whole in its page,
  ;; or continued on the next pages: $spanning_crc_ok), whether its CRC-32C matches: 1 at
  ;; $table + (its offset / 8) when it does, else 0. Nothing else is
  ;; checked and nothing is trusted: a verdict is a fact about the bytes at that offset (xl_tot_len,
  ;; the bytes it covers, xl_crc), which `scan` uses only for a record it reached and checked
  ;; itself, in the window content the verdicts were computed on.
  (func (export "verdicts") (param $win i32) (param $len i32) (param $table i32)
    (local $pg i32) (local $pend i32) (local $o i32) (local $tot i32) (local $info i32)
    (local $rem i32) (local $end i32)
    ;; Every verdict of the previous content cleared first (8 bytes a store).
    (local.set $o (local.get $table))
    (local.set $end (i32.add (local.get $table) (i32.shr_u (local.get $len) (i32.const 3))))
    (block $cleared
      (loop $clear
        (br_if $cleared (i32.ge_u (local.get $o) (local.get $end)))
        (i64.store (local.get $o) (i64.const 0))
        (local.set $o (i32.add (local.get $o) (i32.const 8)))
        (br $clear)))
    (local.set $pg (local.get $win))
    (local.set $end (i32.add (local.get $win) (local.get $len)))
    (block $done
      (loop $page
        (br_if $done (i32.ge_u (local.get $pg) (local.get $end)))
        (local.set $pend (i32.add (local.get $pg) (i32.const 8192)))
        (local.set $info (i32.load16_u offset=2 (local.get $pg)))
        ;; XLP_LONG_HEADER: 40 bytes, else 24.
        (local.set $o
          (i32.add (local.get $pg)
            (select (i32.const 40) (i32.const 24) (i32.and (local.get $info) (i32.const 2)))))
        ;; XLP_FIRST_IS_CONTRECORD: the rest of a record comes first.
        (if (i32.and (local.get $info) (i32.const 1))
          (then
            (local.set $rem (i32.load offset=16 (local.get $pg)))
            (if (i32.ge_u (local.get $rem) (i32.sub (local.get $pend) (local.get $o)))
              (then (local.set $o (local.get $pend)))
              (else
                (local.set $o
                  (i32.and (i32.add (i32.add (local.get $o) (local.get $rem)) (i32.const 7))
                    (i32.const -8)))))))
        (block $page_done
          (loop $rec
            (br_if $page_done (i32.gt_u (i32.add (local.get $o) (i32.const 24)) (local.get $pend)))
            (local.set $tot (i32.load (local.get $o)))
            (br_if $page_done (i32.lt_u (local.get $tot) (i32.const 24)))
            ;; A record that continues on the next pages: its verdict over the bytes reassembled
            ;; as the reader does (each next page's bytes after its header), then this page ends.
            (if (i32.gt_u (local.get $tot) (i32.sub (local.get $pend) (local.get $o)))
              (then
                (if (call $spanning_crc_ok (local.get $o) (local.get $tot) (local.get $pend)
                      (local.get $end))
                  (then
                    (i32.store8
                      (i32.add (local.get $table)
                        (i32.shr_u (i32.sub (local.get $o) (local.get $win)) (i32.const 3)))
                      (i32.const 1))))
                (br $page_done)))
            (if (call $crc_ok (local.get $o) (local.get $tot))
              (then
                (i32.store8
                  (i32.add (local.get $table)
                    (i32.shr_u (i32.sub (local.get $o) (local.get $win)) (i32.const 3)))
                  (i32.const 1))))
            (local.set $o
              (i32.and (i32.add (i32.add (local.get $o) (local.get $tot)) (i32.const 7))
                (i32.const -8)))
            (br $rec)))
        (local.set $pg (local.get $pend))
        (br $page))))

  ;; $fragments for one record the TypeScript reader assembled (or read) itself: its full-page
  ;; image bytes, or -1 when DecodeXLogRecord would refuse it. flags as for scan.
  (func (export "recordFpi") (param $o i32) (param $tot i32) (param $flags i32) (result i32)
    (call $fragments (local.get $o) (local.get $tot)
      (i32.and (local.get $flags) (i32.const 1))
      (i32.and (i32.shr_u (local.get $flags) (i32.const 8)) (i32.const 255))
      (i32.const -1) (i32.const 0)))

;; $fragments for one record the TypeScript reader assembled (or read) itself, for views():
  ;; its block references and main data length written as record 0 of a scan's output (slots
  ;; from 0), its full-page image bytes returned, or -1 when DecodeXLogRecord would refuse it.
  (func (export "recordView") (param $o i32) (param $tot i32) (param $flags i32) (result i32)
    (call $fragments (local.get $o) (local.get $tot)
      (i32.and (local.get $flags) (i32.const 1))
      (i32.and (i32.shr_u (local.get $flags) (i32.const 8)) (i32.const 255))
      (i32.const 0) (i32.const 0)))

;; The records from $o on that lie whole inside [.., $limit) (the page's end, or the range's),
  ;; each accepted as the TypeScript hot path accepts one: xl_tot_len at least 24 and inside the
  ;; limit, a known rmgr id (flags bit 1: 128–255 are custom rmgrs, 15+), xl_prev equal to the
  ;; record before (the first: $prev_lo/$prev_hi), not an XLOG SWITCH, CRC-32C matching, the
  ;; fragments adding up. Writes each record's values into the output columns from index $at on;
  ;; stops after $max records or before the first it does not accept; returns how many.
  ;; $base_lo/$base_hi: the LSN of address 0 (two's complement: it may be below 0).
  ;; flags: bit 0 top-level xid (14+), bit 1 custom rmgrs (15+), bit 2 the CRC worker's verdicts
  ;; on this window's content are complete (the verdict of address a is at $vt + a / 8, and a
  ;; 1 there spares the CRC-32C), bit 3 views: each record's block references and main data
  ;; length too ($fragments' $i), its slots from 0 on (a scan stops before a record that might
  ;; not fit the 1024 slots: a page holds fewer), bits 8–15 BKPIMAGE_COMPRESSED.
  (func (export "scan") (param $o i32) (param $limit i32) (param $prev_lo i32) (param $prev_hi i32)
    (param $base_lo i32) (param $base_hi i32) (param $at i32) (param $max i32) (param $flags i32)
    (param $vt i32) (result i32)
    (local $n i32) (local $tot i32) (local $rmid i32) (local $fpi i32) (local $lsn i64)
    (local $base i64) (local $next i32) (local $i i32) (local $ok i32) (local $views i32)
    (local $bo i32)
    (local.set $views (i32.and (local.get $flags) (i32.const 8)))
    (local.set $base
      (i64.or (i64.shl (i64.extend_i32_u (local.get $base_hi)) (i64.const 32))
        (i64.extend_i32_u (local.get $base_lo))))
    (block $stop
      (loop $more
        (br_if $stop (i32.ge_u (local.get $n) (local.get $max)))
        (br_if $stop (i32.gt_u (i32.add (local.get $o) (i32.const 24)) (local.get $limit)))
        (local.set $tot (i32.load (local.get $o)))
        (br_if $stop (i32.lt_u (local.get $tot) (i32.const 24)))
        (br_if $stop (i32.gt_u (local.get $tot) (i32.sub (local.get $limit) (local.get $o))))
        (local.set $rmid (i32.load8_u offset=17 (local.get $o)))
        (if (i32.gt_u (local.get $rmid) (i32.const 21))
          (then
            (br_if $stop (i32.eqz (i32.and (local.get $flags) (i32.const 2))))
            (br_if $stop (i32.lt_u (local.get $rmid) (i32.const 128)))))
        (br_if $stop (i32.ne (i32.load offset=8 (local.get $o)) (local.get $prev_lo)))
        (br_if $stop (i32.ne (i32.load offset=12 (local.get $o)) (local.get $prev_hi)))
        ;; XLOG SWITCH moves the next record to the next segment: the TypeScript path does it.
        (br_if $stop
          (i32.and (i32.eqz (local.get $rmid))
            (i32.eq (i32.and (i32.load8_u offset=16 (local.get $o)) (i32.const 0xf0))
              (i32.const 0x40))))
        (local.set $ok (i32.const 0))
        (if (i32.and (local.get $flags) (i32.const 4))
          (then
            (local.set $ok
              (i32.load8_u (i32.add (local.get $vt) (i32.shr_u (local.get $o) (i32.const 3)))))))
        (if (i32.eqz (local.get $ok))
          (then (br_if $stop (i32.eqz (call $crc_ok (local.get $o) (local.get $tot))))))
        (local.set $i (i32.add (local.get $at) (local.get $n)))
        ;; 33 block references at most (ids 0–32).
        (br_if $stop
          (i32.and (i32.ne (local.get $views) (i32.const 0))
            (i32.gt_u (i32.add (local.get $bo) (i32.const 33)) (i32.const 1024))))
        (local.set $fpi
          (call $fragments (local.get $o) (local.get $tot)
            (i32.and (local.get $flags) (i32.const 1))
            (i32.and (i32.shr_u (local.get $flags) (i32.const 8)) (i32.const 255))
            (select (local.get $i) (i32.const -1) (local.get $views)) (local.get $bo)))
        (br_if $stop (i32.lt_s (local.get $fpi) (i32.const 0)))
        (if (local.get $views)
          (then
            (local.set $bo
              (i32.add (local.get $bo) (i32.load8_u offset=172032 (local.get $i))))))
        ;; MAXALIGN: the next record starts on an 8-byte boundary.
        (local.set $next
          (i32.and (i32.add (i32.add (local.get $o) (local.get $tot)) (i32.const 7))
            (i32.const -8)))
        (local.set $lsn (i64.add (local.get $base) (i64.extend_i32_u (local.get $o))))
        (i32.store offset=16384 (i32.shl (local.get $i) (i32.const 2)) (local.get $o))
        (i32.store offset=32768 (i32.shl (local.get $i) (i32.const 2)) (local.get $fpi))
        (i32.store offset=49152 (i32.shl (local.get $i) (i32.const 2)) (local.get $tot))
        (f64.store offset=65536 (i32.shl (local.get $i) (i32.const 3))
          (f64.convert_i64_u (local.get $lsn)))
        (f64.store offset=98304 (i32.shl (local.get $i) (i32.const 3))
          (f64.convert_i64_u
            (i64.add (local.get $lsn)
              (i64.extend_i32_u (i32.sub (local.get $next) (local.get $o))))))
        (i32.store8 offset=131072 (local.get $i) (local.get $rmid))
        (i32.store8 offset=135168 (local.get $i) (i32.load8_u offset=16 (local.get $o)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (local.set $prev_lo (i32.wrap_i64 (local.get $lsn)))
        (local.set $prev_hi (i32.wrap_i64 (i64.shr_u (local.get $lsn) (i64.const 32))))
        (local.set $o (local.get $next))
        (br $more)))
    (local.get $n))
)

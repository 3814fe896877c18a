// The layer audit: does every linear compute in the precision the trainer's map holds, with
// exactly the weights the trainer's quantizer makes from its FP32 masters? The recipe's claim —
// the rollout and the trainer see identical weights — checked linear by linear, after every
// weight refresh, instead of trusted.
#pragma once

#include <vector>

#include "contract/step_record.hpp"
#include "model/decoder.hpp"

namespace fp8rl {

// One row per decoder linear (layer-major, modules in order). The generator's side is what
// the linear's GEMMs read now (its precision and compute copies: FP8 tiles of W and of Wᵀ, or
// the BF16 copy); the trainer's side is trainer_map's precision for it and the weights made
// from the master (the quantizer with trainer_qopt, or a checkpoint's own FP8 tiles while they
// are in use). max_abs_diff compares the two as FP32 values; ok needs equal precisions and
// bit-identical codes, scales and BF16 values. The bits are compared in backend memory
// (Backend::equal_bytes: one pass over the weights on the device); only a linear that differs
// is copied to the host to measure the difference.
std::vector<AuditRow> audit_weights(DecoderModel& model, const PrecisionMap& trainer_map,
                                    const QuantOptions& trainer_qopt);

}  // namespace fp8rl

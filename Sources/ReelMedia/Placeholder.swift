import CX264
import CFFmpeg
import CYUV
import CReelShim
// Compile-time probe that the C modules import; replaced by the real media layer.
func _probe() -> Int32 { _ = avformat_version(); _ = creel_averror_eof(); return X264_BUILD }

"""Every instruction opcode of the PTX ISA up to 9.x (the word before the first dot), so the parser can
reject unknown instructions at parse time. Multi-word instructions (`cp.async`, `bar.warp.sync`,
`mbarrier.arrive`, `tcgen05.mma`, ...) appear under their first word; their remaining words are modifiers.
"""

OPCODES = frozenset("""
abs activemask add addc alloca and applypriority atom
bar barrier bfe bfi bfind bmsk bra brev brkpt brx
call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta
discard div dp2a dp4a
elect ex2 exit
fabric
fence fma fns
getctarank griddepcontrol
isspacep istypep
ld ldmatrix ldu lg2 lop3
mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix mul mul24 multimem
nanosleep neg not
or
pmevent popc prefetch prefetchu prmt
rcp red redux rem ret rsqrt
sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc
suld suq sured sust szext
tanh tcgen05 tensormap testp tex tld4 trap txq
vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4
vote vset vset2 vset4 vshl vshr vsub vsub2 vsub4
wgmma wmma
xor
""".split())
